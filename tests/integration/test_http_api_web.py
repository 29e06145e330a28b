"""The web page's server side over plain HTTP: the page needs no token, everything
else the token or the login cookie, and a cookie alone never makes a POST
count (CSRF token and same-host Origin) (ADR 0024)."""

from __future__ import annotations

import asyncio

from core.extensions.contract import DeadLetterState, ExtensionState, KernelStatus
from support.harness import wait_for
from support.http_api_support import AUTH, TOKEN, fake_kernel_channel

ASK = {"model": "hearth", "user": "web", "messages": [{"role": "user", "content": "hi"}]}


async def log_in(http) -> str:
    response = await http.post("/web/login", json={"token": TOKEN})
    assert response.status_code == 204
    return (await http.get("/web/session")).json()["csrf"]


async def test_the_page_is_served_with_a_strict_content_security_policy(tmp_path):
    async with fake_kernel_channel(tmp_path) as (_, _ctx, http):
        page = await http.get("/")
        script = await http.get("/web/app.js")
        other = await http.get("/web/secrets.txt")
    assert page.status_code == 200 and "<title>Hearth</title>" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert script.headers["content-type"].startswith("text/javascript")
    assert other.status_code == 404


async def test_login_sets_a_strict_http_only_cookie(tmp_path):
    async with fake_kernel_channel(tmp_path) as (_, _ctx, http):
        wrong = await http.post("/web/login", json={"token": "guess"})
        before = await http.get("/web/session")
        right = await http.post("/web/login", json={"token": TOKEN})
        session = await http.get("/web/session")
        out = await http.post("/web/logout", headers={"X-CSRF-Token": session.json()["csrf"]})
        after = await http.get("/web/status")
    assert wrong.status_code == 401 and before.status_code == 401
    cookie = right.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
    assert session.json()["conversation"] == "web" and len(session.json()["csrf"]) == 64
    assert out.status_code == 204 and after.status_code == 401


async def test_a_cookie_posts_only_with_the_csrf_token_from_this_origin(tmp_path):
    async with fake_kernel_channel(tmp_path) as (ext, ctx, http):
        csrf = await log_in(http)
        bare = await http.post("/v1/chat/completions", json=ASK)
        forged = await http.post(
            "/v1/chat/completions", json=ASK, headers={"X-CSRF-Token": "0" * 64}
        )
        foreign = await http.post(
            "/v1/chat/completions",
            json=ASK,
            headers={"X-CSRF-Token": csrf, "Origin": "http://evil.example"},
        )
        assert ctx.user_messages == []
        origin = str(http.base_url).rstrip("/")
        asking = http.post(
            "/v1/chat/completions", json=ASK, headers={"X-CSRF-Token": csrf, "Origin": origin}
        )
        task = asyncio.create_task(asking)
        await wait_for(lambda: ctx.user_messages)
        await ext.send_to_user(ctx.user_messages[0]["user_id"], "hello, page")
        answered = await task
        status = await http.get("/web/status")  # a GET with the cookie alone is fine
    assert bare.status_code == 403 and forged.status_code == 403 and foreign.status_code == 403
    assert "X-CSRF-Token" in bare.json()["error"]["message"]
    assert "cross-origin" in foreign.json()["error"]["message"]
    assert answered.json()["choices"][0]["message"]["content"] == "hello, page"
    assert ctx.user_messages[0]["user_id"].startswith("web#reply:")
    assert status.status_code == 200


async def test_status_and_requeue_go_through_the_context(tmp_path):
    async with fake_kernel_channel(tmp_path) as (_, ctx, http):
        ctx.status = KernelStatus(
            uptime_s=61.0,
            model="fake-model",
            extensions=(ExtensionState("telegram_channel", "error", False, "no token"),),
            mcp_servers=(),
            event_counts={"dead": 1},
            recent_events=(),
            dead_letters=(
                DeadLetterState(
                    7, "kernel.notify", "reminder.due", "scheduler", 5, "boom", 1.0, 2.0
                ),
            ),
        )
        status = (await http.get("/web/status", headers=AUTH)).json()
        csrf = await log_in(http)
        refused = await http.post("/web/requeue", json={"event_id": 7})
        requeued = await http.post(
            "/web/requeue", json={"event_id": 7}, headers={"X-CSRF-Token": csrf}
        )
        bad = await http.post(
            "/web/requeue", json={"event_id": "7"}, headers={"X-CSRF-Token": csrf}
        )
    assert status["kernel"]["extensions"][0]["error"] == "no token"
    assert status["kernel"]["dead_letters"][0]["event_id"] == 7
    assert status["api"]["listen"] == str(http.base_url.netloc, "ascii")
    assert refused.status_code == 403
    assert requeued.json() == {"event_id": 7, "requeued": 1}
    assert bad.status_code == 400
    assert ctx.requeued == [7]
