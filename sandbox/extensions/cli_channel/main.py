"""CLI channel: an interactive REPL, or a line-by-line pipe.

Interactive (stdin is a terminal): prompt_toolkit with history, line
editing and Tab completion of ``/commands`` and ``#post-processors``;
replies stream in; proactive messages print above the prompt.
Piped: each line is journaled as a ``user.message`` and answered before the
next is read; replies and proactive messages go to stdout verbatim; at end
of input pending work finishes and the kernel is asked to shut down.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from core.extensions.contract import ExtensionContext
from core.extensions.sdk import BaseExtension

if TYPE_CHECKING:
    from .completion import HearthCompleter

HISTORY_FILE = "history.txt"


class CliChannel(BaseExtension):
    def __init__(self) -> None:
        self._user_id = "local"
        self._prefix = ""
        self._reply_timeout_s = 900.0
        self._replied = asyncio.Event()
        self._interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self._streamed = False

    # ------------------------------------------------------------ lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        self._user_id = str(context.get_config("user_id") or _login_name())
        self._prefix = str(context.get_config("prefix", ""))
        self._reply_timeout_s = float(context.get_config("reply_timeout_s", 900))

    # ------------------------------------------------------------ input

    async def run_background(self) -> None:
        if self._interactive:
            await self._repl()
        else:
            await self._pipe()

    async def _pipe(self) -> None:
        lines = _stdin_lines()
        while True:
            line = await lines.get()
            if line is None:
                break
            text = line.rstrip("\r\n")
            if text.strip():
                await self._ask(text)
        self.context.logger.info("end of input; shutting down")
        self.context.request_shutdown()

    async def _repl(self) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.patch_stdout import patch_stdout

        from .completion import HearthCompleter

        history = FileHistory(str(Path(self.context.data_dir) / HISTORY_FILE))
        completer = HearthCompleter()
        session: PromptSession[str] = PromptSession(history=history, completer=completer)
        print("Hearth is listening. /help lists commands; Tab completes; Ctrl-D quits.")
        await self._refresh(completer)
        with patch_stdout(raw=True):
            while True:
                # later refreshes run while the prompt is up: keys typed before a
                # prompt starts may be lost, so nothing is awaited between prompts
                refresh = asyncio.create_task(self._refresh(completer))
                try:
                    text = await session.prompt_async("you> ")
                except (EOFError, KeyboardInterrupt):
                    break
                finally:
                    await refresh
                if text.strip():
                    await self._ask(text)
        self.context.request_shutdown()

    async def _refresh(self, completer: HearthCompleter) -> None:
        """Commands and this user's ``#names`` as they are now (stale lists if that
        fails; never raises)."""
        try:
            commands = await self.context.list_commands()
            tags = await self.context.list_post_processors(self._user_id)
        except Exception as exc:
            self.context.logger.debug("completion lists not refreshed: %s", exc)
            return
        completer.update(commands, tags)

    async def _ask(self, text: str) -> None:
        self._replied.clear()
        await self.context.on_user_message(text, self._user_id)
        try:
            async with asyncio.timeout(self._reply_timeout_s):
                await self._replied.wait()
        except TimeoutError:
            self._write(f"(no reply after {self._reply_timeout_s:g} s; still working)")

    # ------------------------------------------------------------ output

    async def send_to_user(self, user_id: str, message: str) -> None:
        self._write(message)
        self._replied.set()

    async def send_message(self, message: str) -> None:
        self._write(message)

    async def on_stream_start(self, user_id: str) -> None:
        self._streamed = False

    async def on_stream_chunk(self, user_id: str, chunk: str) -> None:
        if self._interactive:
            if not self._streamed:
                sys.stdout.write(self._prefix)
            self._streamed = True
            sys.stdout.write(chunk)
            sys.stdout.flush()

    async def on_stream_status(self, user_id: str, status: str) -> None:
        if self._interactive:
            print(f"  [{status}]", file=sys.stderr)

    async def on_stream_end(self, user_id: str, full_text: str) -> None:
        if self._streamed:
            sys.stdout.write("\n")
            sys.stdout.flush()
        else:
            self._write(full_text)
        self._streamed = False
        self._replied.set()

    def _write(self, text: str) -> None:
        sys.stdout.write(f"{self._prefix}{text}\n")
        sys.stdout.flush()


def _login_name() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "local"


def _stdin_lines() -> asyncio.Queue[str | None]:
    """Lines of stdin from a daemon thread (a blocked read never holds up exit)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        try:
            for line in sys.stdin:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            loop.call_soon_threadsafe(queue.put_nowait, None)
        except RuntimeError:  # the loop closed while we were reading
            return

    threading.Thread(target=read, name="cli-stdin", daemon=True).start()
    return queue
