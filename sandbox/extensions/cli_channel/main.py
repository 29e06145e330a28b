"""CLI channel: an interactive REPL, or a line-by-line pipe.

Interactive (stdin is a terminal): prompt_toolkit with history, line
editing and Tab completion of ``/commands`` and ``#post-processors``;
replies stream in; proactive messages print above the prompt. While a turn
runs, tool progress is one status line, replaced as it changes, and Ctrl-C
cancels the turn (``system.turn.cancel``) and gives the prompt back; at the
prompt Ctrl-C clears the line, on an empty line asks once before quitting,
and Ctrl-D quits.
Piped: each line is journaled as a ``user.message`` and answered before the
next is read; replies and proactive messages go to stdout verbatim; at end
of input pending work finishes and the kernel is asked to shut down.

Questions (``InteractiveChannel``, ADR 0021) are asked inline — an approval
as ``Allow kv_set(key="x")? [y]es once / [a]lways / [N]o`` — and the next
line typed is the answer (an empty line is the default, no), journaled with
``answer_request``; then the reply of the turn it belongs to is awaited.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
import threading
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.extensions.contract import TURN_CANCEL_TOPIC, ExtensionContext, UserRequest
from core.extensions.sdk import BaseExtension

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from .completion import HearthCompleter

HISTORY_FILE = "history.txt"
CLEAR_LINE = "\r\x1b[2K"
QUIT_HINT = "(press Ctrl-C again or Ctrl-D to quit)"
CTRL_C = "\x03"


class CliChannel(BaseExtension):
    def __init__(self) -> None:
        self._user_id = "local"
        self._prefix = ""
        self._reply_timeout_s = 900.0
        self._replied = asyncio.Event()
        self._interactive = sys.stdin.isatty() and sys.stdout.isatty()
        self._streamed = False
        self._questions: deque[UserRequest] = deque()  # asked, not yet answered here
        self._status_shown = False  # a status line is on screen, to be replaced
        self._stream_open = False  # a turn's reply is streaming: it ends in on_stream_end
        # a message (not a command, not an answer) was sent and its turn's stream has
        # not started yet: its reply comes through the stream, so what is sent to the
        # user meanwhile is proactive (a reminder firing before the turn starts)
        self._turn_pending = False
        self._cancelling = False  # Ctrl-C was pressed during this turn
        self._keys: Any = None  # the terminal's input (prompt_toolkit), read during turns

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
            if self._questions or text.strip():
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
        session: PromptSession[str] = PromptSession(
            history=history, completer=completer, key_bindings=_prompt_keys()
        )
        self._keys = session.input
        print("Hearth is listening. /help lists commands; Tab completes; Ctrl-D quits.")
        await self._refresh(completer)
        quit_armed = False
        with patch_stdout(raw=True):
            while True:
                # later refreshes run while the prompt is up: keys typed before a
                # prompt starts may be lost, so nothing is awaited between prompts
                refresh = asyncio.create_task(self._refresh(completer))
                try:
                    text = await self._read_line(session)
                except EOFError:
                    break
                except KeyboardInterrupt:  # Ctrl-C on an empty line (it clears a typed one)
                    if quit_armed:
                        break
                    quit_armed = True
                    self._write(QUIT_HINT)
                    continue
                finally:
                    await refresh
                quit_armed = False
                if self._questions or text.strip():
                    await self._ask(text)
        self.context.request_shutdown()

    async def _read_line(self, session: PromptSession[str]) -> str:
        """The next line; the answer to a ``secret`` question is typed hidden, in a
        session of its own, so it reaches neither the screen nor the history file."""
        from prompt_toolkit import PromptSession

        if self._questions and self._questions[0].kind == "secret":
            hidden: PromptSession[str] = PromptSession()
            return await hidden.prompt_async("secret> ", is_password=True)
        return await session.prompt_async("you> ")

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
        """Send a line — the answer to the oldest open question, else a message —
        and wait for what comes back: a reply, or the next question."""
        self._replied.clear()
        if self._questions:
            self._turn_pending = False
            request = self._questions.popleft()
            answer = _answer_value(request, text)
            await self.context.answer_request(request.id, answer, self._user_id)
        else:
            self._turn_pending = not text.lstrip().startswith("/")
            await self.context.on_user_message(text, self._user_id)
        self._cancelling = False
        try:
            async with asyncio.timeout(self._reply_timeout_s):
                await self._wait_for_reply()
        except TimeoutError:
            self._write(f"(no reply after {self._reply_timeout_s:g} s; still working)")

    async def _wait_for_reply(self) -> None:
        """Until the reply (or a question) comes. In the terminal, keys are read
        meanwhile, raw, so Ctrl-C is a key here (not a signal stopping Hearth)."""
        if not self._interactive or self._keys is None:
            await self._replied.wait()
            return
        keys = self._keys

        pending: set[asyncio.Task[None]] = set()

        def on_keys() -> None:
            if any(press.data == CTRL_C for press in keys.read_keys()):
                task = asyncio.ensure_future(self._cancel_turn())
                pending.add(task)
                task.add_done_callback(pending.discard)

        with keys.raw_mode(), keys.attach(on_keys):
            await self._replied.wait()

    async def _cancel_turn(self) -> None:
        """Ctrl-C during a turn: ask the kernel to stop it; the reply then comes."""
        if self._cancelling:
            return
        self._cancelling = True
        self._show_status("  [cancelling…]")
        try:
            await self.context.emit(
                TURN_CANCEL_TOPIC,
                {"channel_id": self.context.extension_id, "user_id": self._user_id},
            )
        except Exception as exc:
            self.context.logger.warning("the turn could not be cancelled: %s", exc)

    # ------------------------------------------------------------ output

    async def send_to_user(self, user_id: str, message: str) -> None:
        """A reply (a command's answer) or a proactive message (a reminder). While a
        turn's reply streams, or before the stream of a message's turn has started,
        it can only be the latter: shown on its own line, and the wait goes on."""
        if self._stream_open or self._turn_pending:
            if self._streamed:
                sys.stdout.write("\n")
            self._write(message)
            return
        self._write(message)
        self._replied.set()

    async def send_message(self, message: str) -> None:
        self._write(message)

    async def on_stream_start(self, user_id: str) -> None:
        self._turn_pending = False
        self._streamed = False
        self._stream_open = True

    async def on_stream_chunk(self, user_id: str, chunk: str) -> None:
        if self._interactive:
            if not self._streamed:
                self._clear_status()
                sys.stdout.write(self._prefix)
            self._streamed = True
            sys.stdout.write(chunk)
            sys.stdout.flush()

    async def on_stream_status(self, user_id: str, status: str) -> None:
        if self._interactive and not self._streamed:
            self._show_status(f"  [{status}]")

    async def on_stream_end(self, user_id: str, full_text: str) -> None:
        self._stream_open = False
        if self._streamed:
            sys.stdout.write("\n")
            sys.stdout.flush()
            if self._cancelling:  # what was streamed so far, then the turn's end
                self._write(full_text)
        elif full_text:
            self._write(full_text)
        self._streamed = False
        if full_text:  # an empty end: the turn paused for a question, asked next
            self._replied.set()

    # ------------------------------------------------------------ questions

    async def ask_user(self, user_id: str, request: UserRequest) -> None:
        self._questions.append(request)
        self._turn_pending = False
        self._write(_prompt(request))
        self._replied.set()  # the next line typed is the answer

    async def close_request(self, user_id: str, request_id: str, outcome: str) -> None:
        """Say how a question ended unless it was answered here (timed out, answered
        elsewhere): it is no longer waiting for a line."""
        waiting = [r for r in self._questions if r.id == request_id]
        if waiting:
            self._questions.remove(waiting[0])
            self._write(f"({outcome})")

    def _write(self, text: str) -> None:
        self._clear_status()
        sys.stdout.write(f"{self._prefix}{text}\n")
        sys.stdout.flush()

    def _show_status(self, line: str) -> None:
        """One status line, replacing the previous one (no new line per tool)."""
        sys.stdout.write(f"{CLEAR_LINE}{line}")
        sys.stdout.flush()
        self._status_shown = True

    def _clear_status(self) -> None:
        if self._status_shown:
            sys.stdout.write(CLEAR_LINE)
            sys.stdout.flush()
            self._status_shown = False


def _prompt_keys() -> Any:
    """Ctrl-C at the prompt clears a typed line; on an empty line it interrupts
    (the REPL then asks once before quitting)."""
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add("c-c")
    def _(event: Any) -> None:
        buffer = event.app.current_buffer
        if buffer.text:
            buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt, style="class:aborting")

    return bindings


def _prompt(request: UserRequest) -> str:
    """The question as one line (a select lists its options, numbered)."""
    if request.kind == "approval":
        return f"{request.prompt} [y]es once / [a]lways / [N]o"
    if request.kind == "confirm":
        return f"{request.prompt} [y/N]"
    if request.kind == "select":
        options = " / ".join(f"[{i}] {o.label}" for i, o in enumerate(request.options, 1))
        return f"{request.prompt} {options}"
    if request.kind == "secret":
        return f"{request.prompt} (typed hidden, not kept)"
    return f"{request.prompt} (type your answer)"


def _answer_value(request: UserRequest, line: str) -> str:
    """What a typed line answers: an option's number or label picks it; otherwise
    the text as typed (the kernel reads y / a / n for approvals)."""
    text = line.strip()
    if request.kind == "select":
        if text.isdigit() and 1 <= int(text) <= len(request.options):
            return request.options[int(text) - 1].value
        for option in request.options:
            if text.lower() in (option.value.lower(), option.label.lower()):
                return option.value
    return text


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
