"""A workflow run survives a SIGKILL (issue 44): the run killed while it waits goes on
at its next step after the restart — on one kernel with SQLite or PostgreSQL, and on
two PostgreSQL worker processes when the one driving it is killed — and each side
effect happens once, the model is asked once. Real ``main.py`` processes, a channel
that writes what it is sent to a file, a tool that writes a line per call."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from conftest import TEST_ISOLATION, ext_code, grant_all
from support.fake_openai import FakeOpenAIServer, models_section
from support.kernel_process import kill, start_kernel, wait_until
from support.scale_support import CHANNEL, CHANNEL_ID, CHANNEL_MANIFEST, Cluster

MARKER = ext_code(
    header="""
    import os
    from agents import function_tool
    """,
    body="""
    def get_tools(self):
        trace = self.ctx.get_config("trace")

        @function_tool
        def mark(text: str) -> str:
            "Write a line down."
            with open(trace, "a") as out:
                out.write(text + "\\n")
                out.flush()
                os.fsync(out.fileno())
            return f"marked {text}"

        return [mark]
    """,
)
CHAIN = {
    "name": "chain",
    "steps": [
        {"id": "one", "tool": "mark", "args": {"text": "one"}},
        {"id": "think", "agent": "Say something about {{one}}"},
        {"id": "pause", "wait": "4s"},
        {"id": "two", "tool": "mark", "args": {"text": "two after {{think}}"}},
        {"id": "tell", "notify": "chain done: {{two}}"},
    ],
}
PARKED = "step pause waits"  # the executor's line when the run parks in its wait
# the fake model answers "echo: " and the prompt
TWO = "two after echo: Say something about marked one"
MARKER_MANIFEST = {"workflows": [CHAIN], "side_effects": False, "config": {"trace": None}}


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def sent(out: Path) -> list[str]:
    return [json.loads(line)["text"] for line in lines(out)]


def test_a_run_killed_while_it_waits_goes_on_after_a_restart_and_acts_once(
    make_ext, ext_root, tmp_path, storage_backend
):
    make_ext(CHANNEL_ID, CHANNEL, CHANNEL_MANIFEST)
    make_ext("marker", MARKER, MARKER_MANIFEST)
    trace, out = tmp_path / "trace.txt", tmp_path / "replies.jsonl"
    with FakeOpenAIServer() as srv:

        def settings(messages: list[list[str]]) -> Path:
            path = tmp_path / "settings.yaml"
            data = {
                "paths": {"extensions": str(ext_root), "data": str(tmp_path / "data")},
                "models": models_section(srv.base_url, max_retries=0),
                "policy": {"profile": "full_auto"},
                "isolation": dict(TEST_ISOLATION),
                "channels": {"default": CHANNEL_ID},
                "storage": storage_backend,
                "workflows": {"poll_s": 0.3},
                "extensions": {
                    CHANNEL_ID: {"out": str(out), "messages": messages},
                    "marker": {"trace": str(trace)},
                },
            }
            path.write_text(yaml.safe_dump(data, sort_keys=False))
            return path

        grant_all(ext_root, tmp_path / "data")
        log = tmp_path / "kernel.log"
        with log.open("a") as stderr:
            first = start_kernel(settings([["u1", "/run chain"]]), stderr)
        try:
            wait_until(lambda: PARKED in log.read_text(), 90, lambda: log.read_text()[-3000:])
        finally:
            kill(first)  # in the 4 s wait: step one done and the model's answer recorded
        assert lines(trace) == ["one"] and len(srv.requests) == 1
        with log.open("a") as stderr:
            second = start_kernel(settings([]), stderr)
        try:
            wait_until(
                lambda: any(t.startswith("chain done") for t in sent(out)),
                90,
                lambda: f"{lines(trace)} {sent(out)}",
            )
        finally:
            kill(second)
    assert lines(trace) == ["one", TWO]
    assert len(srv.requests) == 1  # the model step is not asked again
    assert sent(out).count(f"chain done: marked {TWO}") == 1


def test_two_workers_a_killed_driver_and_the_run_finished_by_the_other(
    make_ext, ext_root, tmp_path, postgres_dsn
):
    make_ext(CHANNEL_ID, CHANNEL, CHANNEL_MANIFEST)
    make_ext("marker", MARKER, MARKER_MANIFEST)
    trace = tmp_path / "trace.txt"
    with FakeOpenAIServer() as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv, [("u1", "/run chain")])
        sections = {"workflows": {"poll_s": 0.3}}
        extensions = {"marker": {"trace": str(trace)}}
        try:
            for name, role in (("w1", "workers"), ("front", "channels"), ("w2", "workers")):
                path = cluster.settings_for(name, role, **sections)
                data = yaml.safe_load(path.read_text())
                data["extensions"].update(extensions)
                path.write_text(yaml.safe_dump(data, sort_keys=False))
            cluster.start("w1", "workers")
            cluster.wait_log("w1", "kernel ready")  # the first worker leads
            cluster.start("w2", "workers")
            cluster.wait_log("w2", "kernel ready")
            cluster.start("front", "channels")
            cluster.wait_log("w1", PARKED, 120)  # the leader drives the run: in its wait
            cluster.kill("w1")
            wait_until(
                lambda: any(r["text"].startswith("chain done") for r in cluster.replies()),
                120,
                lambda: f"{lines(trace)} {cluster.replies()}\n{cluster.log('w2')[-3000:]}",
            )
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    assert lines(trace) == ["one", TWO]
    assert len(srv.requests) == 1
    done = [r for r in cluster.replies() if r["text"].startswith("chain done")]
    assert len(done) == 1 and done[0]["user"] == "u1"
