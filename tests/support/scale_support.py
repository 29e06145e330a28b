"""Several kernel processes (``main.py`` subprocesses) on one PostgreSQL database.

``Cluster`` writes one settings file and one data directory per process (the
extensions directory is shared), starts them with a role, kills or stops
them, and reads what the test channel ``chan`` was sent. ``chan`` journals the
messages of its config once (idempotency keys) when it starts, and appends
every reply as one JSON line naming the process that sent it. ``PipedKernel``
is a process run as a user runs the CLI with a pipe: lines in, replies out.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import yaml

from conftest import PROJECT_ROOT, TEST_ISOLATION, ext_code, grant_all
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


class PipedKernel:
    """A kernel process whose stdin the test types into; ``lines``: its stdout so far."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        assert proc.stdout is not None
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            self.lines.append(line.rstrip("\n"))

    def type(self, line: str) -> None:
        """One line, as typed: written and flushed at once."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """End of input (Ctrl-D): the CLI finishes its work and shuts the kernel down."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()


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
            "isolation": dict(TEST_ISOLATION),
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

    def start(
        self, name: str, role: str, env: dict[str, str] | None = None, **sections: Any
    ) -> subprocess.Popen[str]:
        """Start process ``name`` under a supervisor's conditions (``env`` added to ours)."""
        settings = self.settings.get(name) or self.settings_for(name, role, **sections)
        log = open(self.root / name / "stderr.log", "a")  # the child keeps its own copy
        extra = {"OPENAI_AGENTS_DISABLE_TRACING": "1", **(env or {})}
        proc = start_kernel(settings, log, **extra)
        log.close()
        self.procs[name] = proc
        return proc

    def start_piped(self, name: str, role: str, **sections: Any) -> PipedKernel:
        """``main.py`` as a user runs it with a pipe (not supervised, so the CLI
        channel runs): the test writes lines to its stdin and reads its stdout."""
        settings = self.settings.get(name) or self.settings_for(name, role, **sections)
        log = open(self.root / name / "stderr.log", "a")
        proc = subprocess.Popen(
            [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"},
        )
        log.close()
        self.procs[name] = proc
        return PipedKernel(proc)

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

    def stop(self, name: str) -> int:
        """SIGTERM process ``name`` and wait for it to end; its exit code."""
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=40)

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
