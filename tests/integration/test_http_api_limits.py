"""A hostile client against the HTTP API's limits (ADR 0047): without the token it
cannot make the process hold a large body, keep connections open without
finishing a request, open connections without bound or guess the login
token at full speed; a logged-out cookie copied elsewhere stops working."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import time

import httpx
import pytest

from sandbox.extensions.http_api import limits
from support.http_api_support import AUTH, TOKEN, fake_kernel_channel

MB = 1024 * 1024
ATTACK_BYTES = 64 * MB


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def stream_body(port: int, path: str, headers: dict[str, str], total: int) -> tuple[str, int, int]:
    """POST a chunked body of ``total`` bytes (no Content-Length to refuse it by),
    stopping once an answer comes: (status line, bytes sent, peak RSS growth).
    A plain socket, so the answer can still be read after the server reset it."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    block = b"%x\r\n%s\r\n" % (MB, b"x" * MB)
    sent, before = 0, rss_bytes()
    peak = before
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n{extra}\r\n".encode()
        )
        try:
            while sent < total and not select.select([sock], [], [], 0)[0]:
                sock.sendall(block)
                sent += MB
                peak = max(peak, rss_bytes())
            if sent >= total:
                sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server hung up on the body
        answer = b""
        with contextlib.suppress(ConnectionError):  # a reset once the answer is read
            while chunk := sock.recv(65536):  # to the end: the server hangs up
                answer += chunk
    return answer.split(b"\r\n", 1)[0].decode(), sent, peak - before


@pytest.mark.parametrize(
    ("path", "headers"),
    [("/web/login", {}), ("/web/requeue", AUTH), ("/v1/chat/completions", AUTH)],
)
async def test_a_large_body_is_refused_while_it_arrives_on_every_endpoint(tmp_path, path, headers):
    async with fake_kernel_channel(tmp_path) as (ext, ctx, _http):
        status, sent, growth = await asyncio.to_thread(
            stream_body, ext.server.port, path, headers, ATTACK_BYTES
        )
    assert status.startswith("HTTP/1.1 413"), status
    assert sent < 16 * MB, f"{sent // MB} MB were taken before the refusal"
    assert growth < 24 * MB, f"the process grew {growth // MB} MB"
    assert ctx.user_messages == []


async def test_a_body_that_never_ends_is_cut_off(tmp_path):
    async with fake_kernel_channel(tmp_path, body_timeout_s=0.5) as (ext, _ctx, _http):
        reader, writer = await asyncio.open_connection("127.0.0.1", ext.server.port)
        writer.write(
            b'POST /web/login HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"token": '
        )
        async with asyncio.timeout(10):
            status = await reader.readline()
        writer.close()
    assert status.startswith(b"HTTP/1.1 408")


async def test_connections_that_never_finish_their_head_are_closed(tmp_path):
    """50 connections: silent ones, half a head, and one trickling a byte at a time."""
    async with fake_kernel_channel(tmp_path, header_timeout_s=1) as (ext, _ctx, http):
        port = ext.server.port
        silent = [await asyncio.open_connection("127.0.0.1", port) for _ in range(25)]
        half = [await asyncio.open_connection("127.0.0.1", port) for _ in range(24)]
        for _, writer in half:
            writer.write(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ")
        trickle_reader, trickle = await asyncio.open_connection("127.0.0.1", port)
        started = time.monotonic()

        async def dribble() -> None:
            for byte in b"GET /v1/models HTTP/1.1\r\nHost: x\r\n":
                trickle.write(bytes([byte]))
                await asyncio.sleep(0.2)  # the attack itself: slower than the deadline

        dribbling = asyncio.ensure_future(dribble())
        async with asyncio.timeout(15):
            ends = [await reader.read() for reader, _ in (*silent, *half)]
            ends.append(await trickle_reader.read())
        took = time.monotonic() - started
        dribbling.cancel()
        after = await http.get("/v1/models", headers=AUTH)
    assert ends == [b""] * 50  # every one closed by the server, none answered
    assert took < 10
    assert after.status_code == 200  # the server still serves


async def test_connections_past_the_cap_are_answered_503_and_closed(tmp_path):
    async with fake_kernel_channel(tmp_path, max_connections=20) as (ext, _ctx, http):
        await http.aclose()  # its pooled connection would count
        idle = [await asyncio.open_connection("127.0.0.1", ext.server.port) for _ in range(20)]
        async with httpx.AsyncClient(base_url=ext.base_url, timeout=10) as fresh:
            refused = await fresh.get("/v1/models", headers=AUTH)
            for _, writer in idle:
                writer.close()
            served = await _first_success(fresh)
    assert refused.status_code == 503 and refused.text == "too many open connections"
    assert served.status_code == 200


async def _first_success(client: httpx.AsyncClient) -> httpx.Response:
    """The first 200 once the server has seen the idle connections go."""
    found: list[httpx.Response] = []

    async def ask() -> bool:
        found.append(await client.get("/v1/models", headers=AUTH))
        return found[-1].status_code == 200

    deadline = time.monotonic() + 10
    while not await ask() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return found[-1]


async def test_wrong_login_tokens_are_throttled_per_client_address(tmp_path):
    async with fake_kernel_channel(tmp_path) as (ext, _ctx, http):
        wrong = [await http.post("/web/login", json={"token": f"guess{i}"}) for i in range(6)]
        blocked = await http.post("/web/login", json={"token": TOKEN})
        other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
        async with httpx.AsyncClient(base_url=ext.base_url, transport=other) as elsewhere:
            unaffected = await elsewhere.post("/web/login", json={"token": TOKEN})
    assert [r.status_code for r in wrong] == [401] * 6
    assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) >= 1
    assert "set-cookie" not in blocked.headers  # the right token does not pass while blocked
    assert unaffected.status_code == 204


async def test_parallel_guesses_get_no_more_tries(tmp_path):
    async with fake_kernel_channel(tmp_path) as (_ext, _ctx, http):
        guesses = [http.post("/web/login", json={"token": f"guess{i}"}) for i in range(30)]
        statuses = [r.status_code for r in await asyncio.gather(*guesses)]
    assert statuses.count(401) == limits.FREE_LOGIN_FAILURES + 1
    assert statuses.count(429) == 30 - statuses.count(401)


def test_each_further_wrong_token_doubles_the_wait(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(limits.time, "monotonic", lambda: now[0])
    throttle = limits.LoginThrottle()
    waits = []
    for _ in range(limits.FREE_LOGIN_FAILURES + 4):
        throttle.check("10.0.0.9")
        throttle.failed("10.0.0.9")
        try:
            throttle.check("10.0.0.9")
        except limits.ApiError as exc:
            waits.append(int(exc.headers["Retry-After"]))
            now[0] += waits[-1]  # the client waits as told
    assert waits == [1, 2, 4, 8]
    throttle.succeeded("10.0.0.9")
    throttle.check("10.0.0.9")  # a right token clears the address


async def test_a_copied_cookie_stops_working_at_logout_also_after_a_restart(tmp_path):
    async with fake_kernel_channel(tmp_path) as (_ext, _ctx, http):
        assert (await http.post("/web/login", json={"token": TOKEN})).status_code == 204
        copied = dict(http.cookies)
        csrf = (await http.get("/web/session")).json()["csrf"]
        assert (await http.get("/web/status", cookies=copied)).status_code == 200
        out = await http.post("/web/logout", headers={"X-CSRF-Token": csrf})
        http.cookies.clear()
        replayed = await http.get("/web/status", cookies=copied)
    async with fake_kernel_channel(tmp_path) as (_ext, _ctx, http):
        after_restart = await http.get("/web/status", cookies=copied)
        again = await http.post("/web/login", json={"token": TOKEN})
        fresh = await http.get("/web/status")
    assert out.status_code == 204
    assert replayed.status_code == 401 and after_restart.status_code == 401
    assert again.status_code == 204 and fresh.status_code == 200
