"""Reminders survive a SIGKILL of the kernel: after a restart past their due
time each is delivered exactly once, marked late; a recurring one catches up
once. Real ``main.py`` processes; a channel extension writes what it is sent
to a file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

from conftest import PROJECT_ROOT, TEST_ISOLATION, ext_code, grant_all
from support.scheduler_helpers import install_scheduler

FILE_CHANNEL = ext_code(
    """
    async def start(self):
        for text in self.ctx.get_config("commands") or []:
            await self.ctx.on_user_message(text, "u1")
    def _write(self, kind, text):
        with open(self.ctx.get_config("out"), "a", encoding="utf-8") as out:
            out.write(json.dumps([kind, text]) + "\\n")
            out.flush()
            os.fsync(out.fileno())
    async def send_to_user(self, user_id, message):
        self._write(f"to {user_id}", message)
    async def send_message(self, message):
        self._write("notify", message)
    """,
    header="import json, os",
)
ONE_SHOTS = ["alpha", "beta", "gamma"]
SHOWN = "⏰ Reminder: "  # how a fired reminder reads (scheduler reminder_format)


def received(path: Path) -> list[tuple[str, str]]:
    if not path.exists():
        return []
    return [tuple(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]


def write_settings(
    tmp_path: Path, ext_root: Path, out: Path, commands: list[str], storage: dict[str, str]
) -> Path:
    path = tmp_path / "settings.yaml"
    settings = {
        "storage": storage,
        "paths": {"extensions": str(ext_root), "data": str(tmp_path / "data")},
        "models": {"default": None},
        "channels": {"default": "filecap"},
        "isolation": dict(TEST_ISOLATION),
        "timezone": "Europe/Berlin",
        "extensions": {
            "scheduler": {"late_grace_s": 1},
            "filecap": {"out": str(out), "commands": commands},
        },
    }
    path.write_text(yaml.safe_dump(settings))
    return path


def start_kernel(settings: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "main.py"), "--settings", str(settings)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def wait_until(condition, proc: subprocess.Popen[bytes], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"kernel exited ({proc.returncode}) before {what}:\n{err}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_pending_reminders_are_delivered_once_after_sigkill_and_restart(
    tmp_path, ext_root, storage_backend
):
    install_scheduler(ext_root)
    (ext_root / "filecap").mkdir()
    (ext_root / "filecap" / "main.py").write_text(FILE_CHANNEL)
    (ext_root / "filecap" / "manifest.yaml").write_text(
        "id: filecap\nname: File capture\nentrypoint: main:Ext\nconfig: {out: null, commands: []}\n"
        "permissions: {user_messages: true}\n"
    )
    out = tmp_path / "received.jsonl"
    commands = [f"/remind {n}s {text}" for n, text in zip((3, 4, 5), ONE_SHOTS, strict=True)]
    commands.append('/remind "* * * * * */2" pulse')  # every 2 seconds

    grant_all(ext_root, tmp_path / "data")
    first = start_kernel(write_settings(tmp_path, ext_root, out, commands, storage_backend))
    try:
        wait_until(lambda: len(received(out)) >= len(commands), first, 30, "the replies")
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    killed_at = time.monotonic()
    before = received(out)
    assert all(kind == "to u1" for kind, _ in before), before  # replies and reminders: to u1
    assert all(t.startswith(("Reminder #", f"{SHOWN}pulse")) for _, t in before), before
    assert not any(text.removeprefix(SHOWN) in ONE_SHOTS for _, text in before)

    time.sleep(max(0.0, killed_at + 5.5 - time.monotonic()))  # every one-shot is now overdue
    second = start_kernel(write_settings(tmp_path, ext_root, out, [], storage_backend))
    try:

        def all_delivered():
            texts = [t for _, t in received(out)[len(before) :]]
            return all(any(t.startswith(SHOWN + name) for t in texts) for name in ONE_SHOTS)

        wait_until(all_delivered, second, 30, "the overdue reminders")
        time.sleep(1.5)  # room for a duplicate to show up
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0
    after = [text for kind, text in received(out)[len(before) :] if kind == "to u1"]
    assert len(after) == len(received(out)) - len(before)  # each went to the user who set it
    counts = Counter(text.removeprefix(SHOWN).split(" (due")[0] for text in after)
    for name in ONE_SHOTS:
        assert counts[name] == 1, after
        [text] = [t for t in after if t.startswith(SHOWN + name)]
        assert text.endswith(", late)")
    late_pulses = [t for t in after if t.startswith(f"{SHOWN}pulse (due ")]
    assert len(late_pulses) == 1, after  # the recurring one catches up once, then runs on time
