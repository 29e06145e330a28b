"""The bundled ``webhook`` extension posts chosen post-processor results to a
local HTTP server, retried through the durable bus, dead-lettered when the
receiver never accepts (sandbox/extensions/webhook/)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from agents.testing import ScriptedModel, assistant_message
from test_postprocess_turn import say

from support.bundled import copy_bundled
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, running_kernel, wait_for

# the bundled post-processors (#json, #decision, …), as in a fresh install
pytestmark = pytest.mark.usefixtures("postprocessors")

ANSWER = "Disk usage exceeded 95% on db-1. We recommend adding storage."


class Receiver:
    """An HTTP server on 127.0.0.1 answering 500 to the first ``failures`` POSTs, or
    302 to every POST when it ``redirect_to`` a URL; any GET is recorded in ``gets``."""

    def __init__(self, failures: int, redirect_to: str | None = None) -> None:
        self.failures = failures
        self.received: list[tuple[int, dict[str, Any], dict[str, str]]] = []
        self.gets: list[dict[str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status = 500 if len(receiver.received) < receiver.failures else 200
                status = 302 if redirect_to else status
                receiver.received.append((status, body, dict(self.headers)))
                self.send_response(status)
                if redirect_to:
                    self.send_header("Location", redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                receiver.gets.append(dict(self.headers))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver_factory() -> Iterator[Any]:
    made: list[Receiver] = []

    def make(failures: int, redirect_to: str | None = None) -> Receiver:
        made.append(Receiver(failures, redirect_to))
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


async def dead_letters(kernel: Any, timeout: float = 10.0) -> list[Any]:
    """The journal's dead letters once there is one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = await kernel.bus.journal.dead_letters()
        if dead:
            return dead
        await asyncio.sleep(0.02)
    raise AssertionError(f"no dead letter within {timeout} s")


def setup(make_ext, settings_file, ext_root, url: str, names: list[str], **target: Any):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    copy_bundled(ext_root, "webhook")
    return settings_file(
        channels={"default": "capture"},
        events={"retry_base_s": 0.05, "retry_max_s": 0.2, "max_attempts": 3},
        extensions={"webhook": {"targets": [{"url": url, "names": names, **target}]}},
    )


async def test_a_chosen_result_is_posted_and_a_failed_post_retried(
    make_ext, settings_file, ext_root, receiver_factory
):
    receiver = receiver_factory(failures=1)
    path = setup(make_ext, settings_file, ext_root, receiver.url, ["alertcheck"])
    model = ScriptedModel([[assistant_message(ANSWER)]])
    async with running_kernel(path, model=model) as kernel:
        await say(kernel, "/ext activate decision critical")
        await say(kernel, "/ext rename decision2 alertcheck")
        await say(kernel, "Disk status? #alertcheck #json", count=2)
        await wait_for(lambda: any(status == 200 for status, _, _ in receiver.received))
        dead = await kernel.bus.journal.dead_letters()
    assert [status for status, _, _ in receiver.received] == [500, 200]  # #json not chosen
    first, retried = receiver.received
    assert first[1] == retried[1]  # the same body on every attempt
    body = retried[1]
    assert (body["name"], body["processor"], body["param"]) == (
        "alertcheck",
        "decision",
        "critical",
    )
    assert body["query"] == "Disk status?"
    assert body["result"]["content"]["branch_key"] == "threshold_exceeded_critical"
    assert body["result"]["success"] is True and body["turn_id"]
    assert first[2]["Idempotency-Key"] == retried[2]["Idempotency-Key"]
    assert dead == []


async def test_a_receiver_that_never_accepts_gives_a_dead_letter(
    make_ext, settings_file, ext_root, receiver_factory
):
    receiver = receiver_factory(failures=99)
    path = setup(make_ext, settings_file, ext_root, receiver.url, ["*"])
    model = ScriptedModel([[assistant_message(ANSWER)]])
    async with running_kernel(path, model=model) as kernel:
        assert await say(kernel, "Disk status? #decision") == [ANSWER]
        dead = await dead_letters(kernel)
    assert len(receiver.received) == 3  # events.max_attempts
    assert dead and dead[0].topic == "postprocess.completed"
    assert dead[0].subscriber_id.startswith("webhook/postprocess.completed/post_")
    assert f"{receiver.url} answered 500" in (dead[0].error or "")


async def test_a_redirect_to_another_host_never_gets_the_targets_authorization(
    make_ext, settings_file, ext_root, receiver_factory
):
    """The configured receiver (127.0.0.1:A) answers 302 to localhost:B, a host the
    user never named: nothing reaches B, and the delivery fails naming the redirect."""
    elsewhere = receiver_factory(failures=0)
    port = elsewhere.server.server_address[1]
    moved = receiver_factory(failures=0, redirect_to=f"http://localhost:{port}/steal")
    secret = {"Authorization": "Bearer webhook-secret"}
    path = setup(make_ext, settings_file, ext_root, moved.url, ["*"], headers=secret)
    model = ScriptedModel([[assistant_message(ANSWER)]])
    async with running_kernel(path, model=model) as kernel:
        assert await say(kernel, "Disk status? #decision") == [ANSWER]
        dead = await dead_letters(kernel)
    assert [status for status, _, _ in moved.received] == [302, 302, 302]
    assert moved.received[0][2]["Authorization"] == "Bearer webhook-secret"
    assert elsewhere.gets == [] and elsewhere.received == []
    assert f"{moved.url} answered 302" in (dead[0].error or "")
    assert f"http://localhost:{port}/steal" in (dead[0].error or "")


async def test_a_bad_target_is_a_load_error_naming_the_field(make_ext, settings_file, ext_root):
    path = setup(make_ext, settings_file, ext_root, "ftp://example.com/x", ["decision"])
    async with running_kernel(path) as kernel:
        record = kernel.loader.records["webhook"]
        assert record.status.value == "error"
        assert "extensions.webhook.targets[0].url must be an http(s) URL" in (record.error or "")
        assert kernel.loader.records["capture"].status.value == "active"
