"""A workflow's questions on a channels/workers split (issue 44, ADR 0091): the worker
driving the run has no channel, so its questions — the approval of a side-effecting
tool step under `safe`, then an `ask` step — go to the channels process as notices,
the person's `/answer ID yes` comes back through the journal to a worker, and the run
goes on. Real `main.py` processes on PostgreSQL (skipped without it): two workers
(either may take an answer) and a channels process whose channel answers yes to every
question it is sent."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from conftest import ext_code
from support.fake_openai import FakeOpenAIServer
from support.kernel_process import wait_until
from support.scale_support import CHANNEL_ID, CHANNEL_MANIFEST, REPLY_SINK, Cluster

# the test channel of the scale suites, answering yes to each question it is sent
ANSWERING_CHANNEL = ext_code(
    header="import asyncio\nimport json\nimport os\nimport re",
    body="""
    async def initialize(self, context):
        self.ctx = context
        self.out = context.get_config("out")
        self.answers = set()
    async def start(self):
        for i, (user, text) in enumerate(self.ctx.get_config("messages") or []):
            await self.ctx.on_user_message(text, user, idempotency_key=f"msg-{i}")
    async def _answer(self, user_id, message):
        found = re.search(r"Reply /answer (\\w+)", message)
        if found is not None:
            await self.ctx.on_user_message(
                f"/answer {found.group(1)} yes", user_id, idempotency_key=f"answer-{found.group(1)}"
            )
"""
    + REPLY_SINK.replace(
        "    async def send_to_user(self, user_id, message):\n        self._write(user_id, message)",
        "    async def send_to_user(self, user_id, message):\n"
        "        self._write(user_id, message)\n"
        "        await self._answer(user_id, message)",
    ),
)
RECORDER = ext_code(
    header="import os\nfrom agents import function_tool",
    body="""
    def get_tools(self):
        trace = self.ctx.get_config("trace")

        @function_tool
        def file_letter(text: str) -> str:
            "File a letter."
            with open(trace, "a") as out:
                out.write(text + "\\n")
                out.flush()
                os.fsync(out.fileno())
            return f"filed {text}"

        return [file_letter]
    """,
)
FILING = {
    "name": "filing",
    "steps": [
        {"id": "file", "tool": "file_letter", "args": {"text": "the letter"}},
        {"id": "ok", "ask": "Tell the family?"},
        {"id": "tell", "notify": "filing done: {{file}}", "when": {"step": "ok", "equals": "yes"}},
    ],
}


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_questions_reach_the_channels_process_and_the_answer_the_worker(
    make_ext, ext_root, tmp_path, postgres_dsn
):
    make_ext(CHANNEL_ID, ANSWERING_CHANNEL, CHANNEL_MANIFEST)
    manifest = {"workflows": [FILING], "side_effects": True, "config": {"trace": None}}
    make_ext("recorder", RECORDER, manifest)
    trace = tmp_path / "trace.txt"
    with FakeOpenAIServer() as srv:
        cluster = Cluster(tmp_path, ext_root, postgres_dsn, srv, [("u1", "/run filing")])
        sections = {"workflows": {"poll_s": 0.3}, "policy": {"profile": "safe"}}
        try:
            for name, role in (("worker", "workers"), ("other", "workers"), ("front", "channels")):
                path = cluster.settings_for(name, role, **sections)
                data = yaml.safe_load(path.read_text())
                data["extensions"]["recorder"] = {"trace": str(trace)}
                path.write_text(yaml.safe_dump(data, sort_keys=False))
            cluster.start("worker", "workers")
            cluster.wait_log("worker", "kernel ready")  # it leads: it drives the run
            cluster.start("other", "workers")  # which may take the answers
            cluster.wait_log("other", "kernel ready")
            cluster.start("front", "channels")
            wait_until(
                lambda: any(r["text"].startswith("filing done") for r in cluster.replies()),
                120,
                lambda: f"{lines(trace)} {cluster.replies()}\n{cluster.log('worker')[-3000:]}",
            )
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    assert lines(trace) == ["the letter"]  # approved once, run once
    texts = [r["text"] for r in cluster.replies()]
    questions = [t for t in texts if "Reply /answer" in t]
    assert len(questions) == 2, texts
    assert questions[0].startswith("Run file_letter") and "filing: Tell the family?" in questions[1]
    assert sum(t.startswith("Answered: yes") for t in texts) == 2, texts
    assert texts.count("filing done: filed the letter") == 1
    ids = [re.search(r"/answer (\w+)", q).group(1) for q in questions]  # type: ignore[union-attr]
    assert len(set(ids)) == 2
