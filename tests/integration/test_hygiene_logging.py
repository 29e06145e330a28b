"""What extensions put into the kernel's log: secrets redacted from the first line,
no forged lines, and floods from a plugin host bounded (issue 11 items 9, 10, 12)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from test_isolation_hostile import command, isolated, settings

from conftest import ext_code
from core.runtime import REDACTOR, TEXT_FORMAT
from support.harness import running_kernel, wait_for

SECRET = "s3cr3t-token-value-9731"
FORGED = "ok\n2026-01-01 00:00:00,000 CRITICAL supervisor: giving up\r\x1b[2K\x9bfake"

TELLER = ext_code(
    """
    async def initialize(self, ctx):
        self.ctx = ctx
        ctx.logger.warning("my token is %s", ctx.get_secret("TELL_TOKEN"))
        ctx.logger.warning("ok\\n2026-01-01 00:00:00,000 CRITICAL supervisor: giving up"
                           "\\r\\x1b[2K\\x9bfake")
        ctx.logger.warning("args %s", "ok\\nCRITICAL supervisor: forged by args")
    """
)


@pytest.fixture
def lines(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    """The text the kernel would write, one entry per record, redacted like stderr."""
    caplog.handler.addFilter(REDACTOR)
    caplog.handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    caplog.set_level(logging.INFO)
    formatted: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            formatted.append(caplog.handler.format(record))

    collect = Collect()
    collect.addFilter(REDACTOR)
    logging.getLogger().addHandler(collect)
    try:
        yield formatted
    finally:
        logging.getLogger().removeHandler(collect)
        caplog.handler.removeFilter(REDACTOR)


def _ext_lines(lines: list[str], ext_id: str) -> list[str]:
    return [line for line in lines if f" ext.{ext_id}: " in line]


@pytest.mark.parametrize("mode", ["inprocess", "process"])
async def test_a_secret_logged_in_initialize_is_redacted_and_lines_cannot_be_forged(
    make_ext, settings_file, monkeypatch, lines: list[str], mode: str
) -> None:
    secret = f"{SECRET}-{mode}"  # REDACTOR is process-wide: a value per test
    monkeypatch.setenv("TELL_TOKEN", secret)
    make_ext("teller", TELLER, {"isolation": mode, "secrets": ["TELL_TOKEN"]})
    async with running_kernel(settings(settings_file)) as kernel:
        assert kernel.loader.records["teller"].status.value == "active"
        await wait_for(lambda: len(_ext_lines(lines, "teller")) >= 3)
    mine = _ext_lines(lines, "teller")
    assert not any(secret in line for line in lines)
    assert any("my token is ***" in line for line in mine)
    for line in mine:
        assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\x9b" not in line
    assert any(
        "ok\\n2026-01-01 00:00:00,000 CRITICAL supervisor: giving up\\r\\x1b[2K\\x9bfake" in line
        for line in mine
    )
    assert any("args ok\\nCRITICAL supervisor: forged by args" in line for line in mine)
    assert not any(line.startswith("2026-01-01") for line in lines)


PRINTER = ext_code(
    """
    def get_commands(self):
        from core.extensions.contract import Command
        import sys

        async def flood(args, turn):
            for n in range(100_000):
                print(f"line {n}")
            sys.stdout.flush()
            return "printed"

        async def notes(args, turn):
            for n in range(5_000):
                self.ctx._peer.notify_nowait("no.such.notification", {"n": n})
            return "sent"

        async def logs(args, turn):
            for n in range(3_000):
                self.ctx.logger.info("log %d", n)
            return "logged"

        return [Command("flood", "print", flood), Command("notes", "notify", notes),
                Command("logs", "log", logs)]
    """
)


async def test_a_host_printing_100000_lines_makes_a_bounded_log(
    make_ext, settings_file, lines: list[str]
) -> None:
    make_ext("printer", PRINTER, isolated())
    # floods are bounded, not timed: a 100,000-line call under load may take seconds
    async with running_kernel(settings(settings_file, call_timeout_s=30)) as kernel:
        instance = kernel.loader.instance("printer")
        limiter = instance._host.output_limiter
        assert await command(kernel, "/flood") == "printed"

        def printed() -> list[str]:
            return [line for line in lines if "] line " in line]

        await wait_for(lambda: len(printed()) + limiter.total_dropped >= 100_000, 60)
    assert len(printed()) <= 1_000
    summaries = [line for line in lines if "lines of plugin host output suppressed" in line]
    assert summaries and len(summaries) <= 20
    assert sum(int(s.split("… ")[1].split()[0].replace(",", "")) for s in summaries) == (
        100_000 - len(printed())
    )


async def test_unknown_notifications_and_log_floods_from_a_host_are_bounded(
    make_ext, settings_file, lines: list[str]
) -> None:
    make_ext("printer", PRINTER, isolated())
    # floods are bounded, not timed: a 100,000-line call under load may take seconds
    async with running_kernel(settings(settings_file, call_timeout_s=30)) as kernel:
        assert await command(kernel, "/notes") == "sent"
        assert await command(kernel, "/logs") == "logged"
        peer = kernel.loader.instance("printer")._peer
        await wait_for(lambda: peer.refusals.total_dropped + _refused(lines) >= 5_000, 30)
    assert _refused(lines) <= 100
    assert not any("Traceback" in line for line in lines)
    logged = [line for line in lines if " ext.printer: " in line and "log " in line]
    assert len(logged) <= 1_000
    assert any("refused notifications suppressed" in line for line in lines)


def _refused(lines: list[str]) -> int:
    return sum("notification 'no.such.notification' refused" in line for line in lines)
