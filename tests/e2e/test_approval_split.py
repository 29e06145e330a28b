"""A turn's approval on a channels/workers split (ADR 0102): a worker pauses the turn,
the question reaches the person through the channels process, their answer —
`/approve ID`, a typed "no" or a button — is taken by a worker (the other one when
the asker has stopped), and the turn resumes once: the tool runs at most once and the
reply arrives once. A household member's `/approve` of the owner's question is
refused. Real `main.py` processes on PostgreSQL (skipped without it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import ext_code
from support.fake_openai import FakeOpenAIServer, ToolCall
from support.kernel_process import wait_until
from support.scale_support import CHANNEL_ID, CHANNEL_MANIFEST, REPLY_SINK, Cluster

# the test channel of the scale suites, also journaling each line appended to `inbox`
# ("USER TEXT") as that user's message, once ("USER !button ID ANSWER": a button's answer)
INBOX_CHANNEL = ext_code(
    header="import asyncio\nimport json\nimport os",
    body="""
    async def initialize(self, context):
        self.ctx = context
        self.out = context.get_config("out")
        self.inbox = context.get_config("inbox")
    async def start(self):
        for i, (user, text) in enumerate(self.ctx.get_config("messages") or []):
            await self.ctx.on_user_message(text, user, idempotency_key=f"msg-{i}")
    async def run_background(self):
        seen = 0
        while True:
            lines = open(self.inbox).read().splitlines() if os.path.exists(self.inbox) else []
            for number, line in enumerate(lines[seen:], seen):
                user, _, text = line.partition(" ")
                if text.startswith("!button "):  # a button pressed under the question
                    _, request_id, answer = text.split()
                    await self.ctx.answer_request(request_id, answer, user)
                else:
                    await self.ctx.on_user_message(text, user, idempotency_key=f"inbox-{number}")
            seen = len(lines)
            await asyncio.sleep(0.05)
"""
    + REPLY_SINK,
)
ROCKETS = ext_code(
    header="import os\nfrom agents import function_tool",
    body="""
    def get_tools(self):
        trace = self.ctx.get_config("trace")

        @function_tool
        def launch(target: str) -> str:
            "Launch a rocket at a target."
            with open(trace, "a") as out:
                out.write(f"{target} {os.getpid()}\\n")
                out.flush()
                os.fsync(out.fileno())
            return f"launched at {target}"

        return [launch]
    """,
)
PEOPLE = {
    "dad": {"role": "owner", "identities": [f"{CHANNEL_ID}:u1"]},
    "kid": {"role": "member", "identities": [f"{CHANNEL_ID}:u2"]},
}


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def texts(cluster: Cluster, user: str) -> list[str]:
    return [r["text"] for r in cluster.replies() if r["user"] == user]


def asked(cluster: Cluster) -> list[str]:
    """The ids of the questions the owner was sent."""
    found = (re.search(r"Reply /approve (\w+) ", t) for t in texts(cluster, "u1"))
    return [m.group(1) for m in found if m is not None]


def start_cluster(
    make_ext: Any, ext_root: Path, tmp_path: Path, dsn: str, srv: FakeOpenAIServer
) -> tuple[Cluster, Path, Path]:
    """Two workers, then the channels process, whose channel asks to launch at once."""
    make_ext(CHANNEL_ID, INBOX_CHANNEL, CHANNEL_MANIFEST)
    make_ext("rockets", ROCKETS, {"side_effects": True, "config": {"trace": None}})
    trace, inbox = tmp_path / "trace.txt", tmp_path / "inbox.txt"
    cluster = Cluster(tmp_path, ext_root, dsn, srv, [("u1", "launch at the moon")])
    for name, role in (("one", "workers"), ("two", "workers"), ("front", "channels")):
        path = cluster.settings_for(name, role, policy={"profile": "safe"}, people=PEOPLE)
        data = yaml.safe_load(path.read_text())
        data["extensions"]["rockets"] = {"trace": str(trace)}
        data["extensions"][CHANNEL_ID]["inbox"] = str(inbox)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    for name in ("one", "two"):
        cluster.start(name, "workers")
    for name in ("one", "two"):
        cluster.wait_log(name, "kernel ready")
    cluster.start("front", "channels")
    return cluster, trace, inbox


def say(inbox: Path, user: str, text: str) -> None:
    with inbox.open("a") as out:
        out.write(f"{user} {text}\n")


def test_approved_on_the_channel_the_other_worker_resumes_once(
    make_ext, ext_root, tmp_path, postgres_dsn
):
    with FakeOpenAIServer() as srv:
        srv.script(ToolCall("launch", {"target": "moon"}), "Launched at the moon.")
        cluster, trace, inbox = start_cluster(make_ext, ext_root, tmp_path, postgres_dsn, srv)
        try:
            wait_until(lambda: asked(cluster), 60, lambda: str(cluster.replies()))
            [question] = asked(cluster)
            mine = f"waits for the answer to question(s) {question}"
            asker = next(name for name in ("one", "two") if mine in cluster.log(name))
            other = "two" if asker == "one" else "one"
            left = cluster.procs[other].pid
            assert cluster.stop(asker) == 0  # only the other worker is left to answer
            say(inbox, "u2", f"/approve {question}")  # a member, not the person asked
            refused = f"Only the person who was asked can answer question {question}."
            wait_until(lambda: refused in texts(cluster, "u2"), 30, lambda: str(cluster.replies()))
            assert not trace.exists()
            say(inbox, "u1", f"/approve {question}")
            wait_until(
                lambda: "Launched at the moon." in texts(cluster, "u1"),
                30,
                lambda: f"{cluster.replies()}\n{cluster.log(other)[-3000:]}",
            )
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    [ran] = lines(trace)  # approved once, run once, by the worker left
    assert ran == f"moon {left}"
    owner = texts(cluster, "u1")
    assert owner.count("Launched at the moon.") == 1, owner
    assert sum("Reply /approve" in t for t in owner) == 1, owner
    assert 'Allowed once: launch(target="moon") runs now.' in owner
    assert len(srv.requests) == 2  # the model was not asked again for the first step


@pytest.mark.parametrize("answer", ["no", "!button {id} deny"], ids=["typed", "button"])
def test_a_no_denies_and_the_turn_finishes_once(answer, make_ext, ext_root, tmp_path, postgres_dsn):
    with FakeOpenAIServer() as srv:
        srv.script(ToolCall("launch", {"target": "moon"}), "Not launched, as you wish.")
        cluster, trace, inbox = start_cluster(make_ext, ext_root, tmp_path, postgres_dsn, srv)
        try:
            wait_until(lambda: asked(cluster), 60, lambda: str(cluster.replies()))
            [question] = asked(cluster)
            say(inbox, "u1", answer.format(id=question))  # either worker takes it
            wait_until(
                lambda: "Not launched, as you wish." in texts(cluster, "u1"),
                30,
                lambda: str(cluster.replies()),
            )
        finally:
            codes = cluster.stop_all()
    assert set(codes.values()) == {0}, {n: cluster.log(n)[-2000:] for n in codes}
    assert not trace.exists()
    owner = texts(cluster, "u1")
    assert owner.count("Not launched, as you wish.") == 1, owner
    assert sum("Reply /approve" in t for t in owner) == 1, owner
    assert srv.requests[1]["messages"][-1]["content"] == "not run: the user denied launch."
