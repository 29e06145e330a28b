"""Prometheus metrics (issue 16, ADR 0028): scraped over HTTP after a real turn.

One kernel with a channel, an extension with a tool, hooks, state and an
event handler that fails once, and an isolated extension; a scripted model
calls a tool that runs and one a hook denies. ``/metrics`` then shows every
family with the numbers that turn produced; the snapshot file and
``main.py metrics`` show the same after the kernel stopped.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from agents.testing import ScriptedModel, assistant_message, function_call
from agents.usage import Usage
from prometheus_client.metrics_core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from conftest import PROJECT_ROOT, ext_code
from core.metrics import SNAPSHOT_FILE
from support.harness import CAPTURE_CHANNEL, CAPTURE_MANIFEST, CONVERSING, running_kernel, wait_for

FAMILIES = {
    "extension_registration": "counter",
    "extension_callback_duration_seconds": "histogram",
    "extension_callback": "counter",
    "extension_state_operations": "counter",
    "extension_state_size_bytes": "histogram",
    "extension_state_evictions": "counter",
    "bus_events_published": "counter",
    "bus_events_delivered": "counter",
    "bus_events_retried": "counter",
    "bus_events_dead_lettered": "counter",
    "bus_queue_depth": "gauge",
    "bus_delivery_latency_seconds": "histogram",
    "turns": "counter",
    "turn_errors": "counter",
    "turn_duration_seconds": "histogram",
    "hearth_model_tokens": "counter",
    "tool_calls": "counter",
    "tool_call_duration_seconds": "histogram",
    "isolated_host_restarts": "counter",
}

NOTES = ext_code(
    header="""
    from agents import function_tool
    from core.extensions.contract import ToolDecision
    """,
    body="""
    failed_once = False

    async def initialize(self, context):
        self.ctx = context
        context.subscribe_event("notes.saved", self.on_saved)

    async def on_saved(self, event):
        if not self.failed_once:
            self.failed_once = True
            raise RuntimeError("first delivery fails")

    async def before_tool_call(self, call, turn):
        if call.name == "wipe":
            return ToolDecision.deny("not today")
        return None

    async def on_llm_output(self, output, turn):
        return None

    def get_tools(self):
        ctx = self.ctx

        @function_tool
        async def note(text: str) -> str:
            "Keep a note."
            await ctx.set_state("first", "x" * 600, scope="extension")
            await ctx.set_state("second", "y" * 600, scope="extension")  # evicts "first"
            await ctx.emit("notes.saved", {"text": text})
            return "noted"

        @function_tool
        async def wipe() -> str:
            "Forget every note."
            return "wiped"

        return [note, wipe]
    """,
)


def parse(text: str) -> dict[str, tuple[str, dict[tuple[str, tuple], float]]]:
    """``{family: (type, {(sample name, sorted labels): value})}``."""
    out = {}
    for family in text_string_to_metric_families(text):
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
        out[family.name] = (family.type, samples)
    return out


def value(families, family: str, sample: str, **labels: str) -> float:
    return families[family][1][(sample, tuple(sorted(labels.items())))]


async def http_get(host: str, port: int, path: str) -> tuple[str, str]:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, body = raw.decode().partition("\r\n\r\n")
    return head.split("\r\n", 1)[0], body


async def test_metrics_after_a_turn(make_ext, settings_file, tmp_path):
    make_ext("capture", CAPTURE_CHANNEL, CAPTURE_MANIFEST)
    make_ext("notes", NOTES, CONVERSING)
    make_ext("walled", ext_code(), {"isolation": "process"})
    path = settings_file(
        channels={"default": "capture"},
        metrics={"listen": f"127.0.0.1:{free_port()}"},
        state={"max_bytes_per_extension": 1024},
        events={"retry_base_s": 0.01, "poll_interval_s": 0.05},
        isolation={"call_timeout_s": 10},
    )
    model = ScriptedModel(
        [
            [function_call("note", {"text": "milk"}, call_id="c1")],
            [function_call("wipe", {}, call_id="c2")],
            [assistant_message("Noted.")],
        ]
    )
    model.set_default_usage(Usage(requests=1, input_tokens=100, output_tokens=7, total_tokens=107))
    async with running_kernel(path, model=model) as kernel:
        capture = kernel.loader.instance("capture")
        await capture.say("remember milk")
        await wait_for(lambda: capture.sent)
        counters = kernel.bus.counters  # user.message, then notes.saved failing once
        await wait_for(lambda: counters.retried == 1 and counters.delivered == 2)
        server = kernel.metrics_export.server
        assert server is not None
        host, port = server.address
        status, body = await http_get(host, port, "/metrics")
        missing, _ = await http_get(host, port, "/other")
        live = await asyncio.create_subprocess_exec(
            sys.executable,
            "main.py",
            "metrics",
            "--settings",
            str(path),
            cwd=PROJECT_ROOT,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        live_out, live_err = await live.communicate()
    assert status == "HTTP/1.1 200 OK" and missing == "HTTP/1.1 404 Not Found"
    families = parse(body)
    assert_base_units(body, families)
    assert {name: kind for name, (kind, _) in families.items() if name in FAMILIES} == FAMILIES

    assert (
        value(
            families,
            "extension_registration",
            "extension_registration_total",
            action="register",
            extension_id="notes",
        )
        == 1
    )
    hook = {"callback_type": "before_tool_call", "extension_id": "notes"}
    assert (
        value(
            families,
            "extension_callback_duration_seconds",
            "extension_callback_duration_seconds_count",
            **hook,
        )
        == 2
    )
    assert (
        value(families, "extension_callback", "extension_callback_total", outcome="ok", **hook) == 2
    )
    assert (
        value(
            families,
            "extension_callback",
            "extension_callback_total",
            callback_type="on_llm_output",
            extension_id="notes",
            outcome="ok",
        )
        == 1
    )
    assert (
        value(
            families,
            "extension_state_operations",
            "extension_state_operations_total",
            operation="set",
            extension_id="notes",
        )
        == 2
    )
    assert (
        value(
            families,
            "extension_state_size_bytes",
            "extension_state_size_bytes_count",
            extension_id="notes",
        )
        == 2
    )
    assert (
        value(
            families,
            "extension_state_evictions",
            "extension_state_evictions_total",
            extension_id="notes",
        )
        == 1
    )
    assert value(families, "bus_events_published", "bus_events_published_total") >= 2
    assert value(families, "bus_events_retried", "bus_events_retried_total") == 1
    assert value(families, "bus_events_dead_lettered", "bus_events_dead_lettered_total") == 0
    assert value(families, "bus_queue_depth", "bus_queue_depth") == 0
    assert value(families, "bus_events_delivered", "bus_events_delivered_total") == 2
    # from publish to the first handler call: the retry is not counted again
    assert (
        value(families, "bus_delivery_latency_seconds", "bus_delivery_latency_seconds_count") == 2
    )
    assert value(families, "turns", "turns_total", status="answered") == 1
    assert value(families, "turn_errors", "turn_errors_total", status="failed") == 0
    assert value(families, "turn_duration_seconds", "turn_duration_seconds_count") == 1
    tokens = ("hearth_model_tokens", "hearth_model_tokens_total")
    assert value(families, *tokens, kind="input", model="ScriptedModel") == 300  # 3 calls
    assert value(families, *tokens, kind="cached", model="ScriptedModel") == 0
    assert value(families, *tokens, kind="output", model="ScriptedModel") == 21
    assert value(families, "tool_calls", "tool_calls_total", tool="note", outcome="completed") == 1
    assert value(families, "tool_calls", "tool_calls_total", tool="wipe", outcome="denied") == 1
    assert (
        value(
            families, "tool_call_duration_seconds", "tool_call_duration_seconds_count", tool="note"
        )
        == 1
    )
    assert (
        value(
            families,
            "isolated_host_restarts",
            "isolated_host_restarts_total",
            extension_id="walled",
        )
        == 0
    )

    # `main.py metrics` asked the running kernel
    assert live.returncode == 0, live_err.decode()
    assert f"metrics of the kernel serving http://127.0.0.1:{port}/metrics" in live_err.decode()
    assert parse(live_out.decode())["turns"][1] == families["turns"][1]

    # stopped: the snapshot holds the final numbers, and `main.py metrics` prints it
    snapshot = (tmp_path / "data" / SNAPSHOT_FILE).read_text()
    assert value(parse(snapshot), "turns", "turns_total", status="answered") == 1
    printed = hearth_metrics(path)
    assert printed.returncode == 0 and "metrics snapshot" in printed.stderr
    assert printed.stdout == snapshot


def assert_base_units(body: str, families) -> None:
    """Durations in seconds, as Prometheus names them: no ``*_ms`` family or series
    (issue 30), a turn's sum a plausible number of seconds, and ``promtool check
    metrics`` content when the machine has promtool."""
    samples = [name for _, (_, series) in families.items() for name, _ in series]
    assert not [n for n in [*families, *samples] if "_ms" in n]
    turn_s = value(families, "turn_duration_seconds", "turn_duration_seconds_sum")
    assert 0 < turn_s < 60
    series = families["turn_duration_seconds"][1]
    bounds = {float(dict(labels)["le"]) for _, labels in series if "le" in dict(labels)}
    assert min(bounds) == 0.0001 and max(bounds - {float("inf")}) == 120  # 0.1 ms .. 120 s
    promtool = shutil.which("promtool")
    if promtool is None:
        return  # promtool is not installed here: the parser's check above stands alone
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_metrics_without_a_kernel_or_snapshot_says_so(settings_file):
    result = hearth_metrics(settings_file())
    assert result.returncode == 1
    assert "no snapshot at" in result.stderr and "start the kernel" in result.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hearth_metrics(settings: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "main.py", "metrics", "--settings", str(settings)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_plugin_host_restart_is_counted(make_ext, settings_file):
    make_ext("walled", ext_code(), {"isolation": "process"})
    async with running_kernel(settings_file(isolation={"call_timeout_s": 10})) as kernel:
        record = kernel.loader.records["walled"]
        pid = record.instance.host_pid
        os.kill(pid, signal.SIGKILL)
        await wait_for(lambda: record.instance.host_pid not in (None, pid), 30)
        await wait_for(lambda: record.status.value == "active", 30)
        families = parse(kernel.metrics.exposition().decode())
    assert (
        value(
            families,
            "isolated_host_restarts",
            "isolated_host_restarts_total",
            extension_id="walled",
        )
        == 1
    )


async def test_metrics_connections_are_capped_and_a_stalled_reader_is_dropped(monkeypatch):
    """Someone holding sockets open: past the cap a connection is closed at once,
    and a client that asks but never reads loses its connection at the deadline."""
    from core.metrics import server as metrics_server

    monkeypatch.setattr(metrics_server, "MAX_CONNECTIONS", 4)
    monkeypatch.setattr(metrics_server, "EXCHANGE_TIMEOUT_S", 1.0)
    big = 20 * 1024 * 1024  # a 20 MB help text: more than the socket buffers hold
    registry = Exposition("hearth_up", "1 when the kernel runs")
    served = metrics_server.MetricsServer("127.0.0.1", 0, registry)
    await served.start()
    host, port = served.address
    try:
        idle = [await asyncio.open_connection(host, port) for _ in range(4)]
        extra_reader, _ = await asyncio.open_connection(host, port)
        async with asyncio.timeout(0.8):  # before any deadline: refused, not timed out
            assert await extra_reader.read() == b""
        for _, writer in idle:
            writer.close()
        await wait_for(lambda: served.open_connections == 0)
        assert (await http_get(host, port, "/metrics"))[0] == "HTTP/1.1 200 OK"

        registry.help = "x" * big
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, port))
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        await wait_for(lambda: served.open_connections == 1)  # answering, stuck on our window
        await wait_for(lambda: served.open_connections == 0, timeout=10)  # then dropped
        sock.setblocking(False)
        received = await _drain(sock)
        sock.close()
    finally:
        await served.aclose()
    assert received < big


class Exposition:
    """A registry of one gauge whose help text a test can make large."""

    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(self.name, self.help, value=1)


async def _drain(sock: socket.socket) -> int:
    loop = asyncio.get_running_loop()
    total = 0
    try:
        while chunk := await loop.sock_recv(sock, 1 << 20):
            total += len(chunk)
    except ConnectionError:
        pass
    return total


async def test_metrics_answers_a_scraper_in_the_format_it_asks_for(monkeypatch):
    """Prometheus asks for OpenMetrics and gzip; curl -I asks for the head only; a
    POST or another path is refused; a connection that never sends its request
    is closed at the exchange deadline."""
    from core.metrics import server as metrics_server

    monkeypatch.setattr(metrics_server, "EXCHANGE_TIMEOUT_S", 0.5)
    served = metrics_server.MetricsServer("127.0.0.1", 0, Exposition("hearth_up", "up"))
    await served.start()
    host, port = served.address

    async def exchange(request: str) -> tuple[str, dict[str, str], bytes]:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(request.encode())
        raw = await reader.read()
        writer.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        status, *lines = head.decode().split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines)
        return status, headers, body

    try:
        status, headers, body = await exchange(
            "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n"
            "Accept-Encoding: gzip\r\n\r\n"
        )
        assert status == "HTTP/1.1 200 OK"
        assert headers["content-type"].startswith("application/openmetrics-text")
        assert headers["content-encoding"] == "gzip"
        assert gzip.decompress(body).decode().endswith("hearth_up 1.0\n# EOF\n")

        status, headers, body = await exchange("HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (status, body) == ("HTTP/1.1 200 OK", b"")
        assert int(headers["content-length"]) > 0 and headers["connection"] == "close"

        status, _, body = await exchange("POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (status, body) == ("HTTP/1.1 405 Method Not Allowed", b"only GET /metrics\n")

        silent_reader, _ = await asyncio.open_connection(host, port)
        async with asyncio.timeout(5):  # closed at the 0.5 s deadline, unanswered
            assert await silent_reader.read() == b""
        await wait_for(lambda: served.open_connections == 0)
    finally:
        await served.aclose()
