"""Several kernel processes (``main.py`` subprocesses) on one PostgreSQL database.

``Cluster`` writes one settings file and one data directory per process (the
extensions directory is shared), starts them with a role, kills or stops
them, and reads what the test channel ``chan`` was sent. ``chan`` journals the
messages of its config once (idempotency keys) when it starts, and appends
every reply as one JSON line naming the process that sent it.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import yaml

from conftest import ext_code, grant_all
from support.fake_openai import FakeOpenAIServer, models_section
from support.kernel_process import kill, start_kernel, wait_until

CHANNEL_ID = "chan"
SHORT_LEASE_S = 2.0  # process heartbeats and the schedule lease, in these tests

# what the channel is sent: one JSON line per message, naming the process that
# sent it (the soak, bench/scale_soak.py, records its channel's replies the same way)
REPLY_SINK = """
    def _write(self, user_id, message):
        line = json.dumps({"pid": os.getpid(), "user": user_id, "text": message})
        with open(self.out, "a") as f:
            f.write(line + "\\n")
            f.flush()
            os.fsync(f.fileno())
    async def send_to_user(self, user_id, message):
        self._write(user_id, message)
    async def send_message(self, message):
        self._write(None, message)
"""

CHANNEL = ext_code(
    header="import json\nimport os",
    body="""
    async def initialize(self, context):
        self.ctx = context
        self.out = context.get_config("out")
    async def start(self):
        for i, (user, text) in enumerate(self.ctx.get_config("messages") or []):
            await self.ctx.on_user_message(text, user, idempotency_key=f"msg-{i}")
"""
    + REPLY_SINK,
)
CHANNEL_MANIFEST = {"permissions": {"user_messages": True}}


def conversation_messages(users: int, per_user: int) -> list[tuple[str, str]]:
    """``(user, text)`` pairs, interleaved: m0 for u0, m1 for u1, …"""
    return [(f"u{i % users}", f"m{i}") for i in range(users * per_user)]


class Cluster:
    """Kernel processes sharing ``dsn``; ``out`` collects what ``chan`` sent."""

    def __init__(
        self,
        root: Path,
        ext_root: Path,
        dsn: str,
        srv: FakeOpenAIServer,
        messages: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> None:
        self.root, self.ext_root, self.dsn, self.srv = root, ext_root, dsn, srv
        self.messages = list(messages)
        self.out = root / "replies.jsonl"
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.settings: dict[str, Path] = {}

    def settings_for(self, name: str, role: str, **sections: Any) -> Path:
        data_dir = self.root / name / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        grant_all(self.ext_root, data_dir)
        data: dict[str, Any] = {
            "paths": {"extensions": str(self.ext_root), "data": str(data_dir)},
            "models": models_section(self.srv.base_url, max_retries=0),
            "logging": {"level": "INFO"},
            "policy": {"profile": "full_auto"},
            "channels": {"default": CHANNEL_ID},
            "storage": {
                "backend": "postgres",
                "postgres_dsn": self.dsn,
                "process_lease_s": SHORT_LEASE_S,
            },
            "kernel": {"role": role},
            "scheduling": {"leader_lease_s": SHORT_LEASE_S},
            "extensions": {
                CHANNEL_ID: {"out": str(self.out), "messages": [list(m) for m in self.messages]}
            },
            **sections,
        }
        path = self.root / name / "settings.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        self.settings[name] = path
        return path

    def start(self, name: str, role: str, **sections: Any) -> subprocess.Popen[str]:
        settings = self.settings.get(name) or self.settings_for(name, role, **sections)
        log = open(self.root / name / "stderr.log", "a")  # the child keeps its own copy
        proc = start_kernel(settings, log, OPENAI_AGENTS_DISABLE_TRACING="1")
        log.close()
        self.procs[name] = proc
        return proc

    def log(self, name: str) -> str:
        return (self.root / name / "stderr.log").read_text(errors="replace")

    def wait_log(self, name: str, text: str, timeout_s: float = 60.0) -> None:
        """Until ``text`` is in the process's log (it died: fail with its log)."""
        wait_until(
            lambda: text in self.log(name),
            timeout_s,
            lambda: f"{name} never logged {text!r}:\n{self.log(name)[-3000:]}",
        )

    def kill(self, name: str) -> None:
        kill(self.procs.pop(name))

    def stop_all(self) -> dict[str, int]:
        """SIGTERM every process still running; their exit codes."""
        codes = {}
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc in list(self.procs.items()):
            try:
                codes[name] = proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[name] = proc.wait(timeout=10)
        self.procs.clear()
        return codes

    def replies(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines() if line]
