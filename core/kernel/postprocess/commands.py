"""``/ext`` and ``/last``: managing activations and reading results, with no model.

``/ext`` lists the user's activations and what can be activated;
``/ext activate NAME [PARAM]`` adds one (auto-named ``json``, ``json2``, …,
PARAM its default, checked by the processor); ``/ext rename OLD NEW``,
``/ext deactivate NAME``; ``/ext show NAME`` prints the processor's source.
``/last`` shows every result of the newest post-processed message,
``/last NAME`` the newest result of that name — silent ones included, after
a restart too (they are read from ``sessions.db``).
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import TYPE_CHECKING

from core.extensions.contract import Command, TurnContext
from core.kernel.conversations.sessions import Conversations
from core.kernel.postprocess.activations import ActivationError
from core.kernel.postprocess.parsing import NAME_RE
from core.kernel.postprocess.render import body

if TYPE_CHECKING:
    from core.kernel.postprocess.service import PostProcessing

__all__ = ["postprocess_commands", "results_key"]

USAGE = (
    "Usage: /ext · /ext activate NAME [PARAM] · /ext rename OLD NEW · "
    "/ext deactivate NAME · /ext show NAME"
)


def results_key(turn: TurnContext) -> str:
    """Whose activations and results a turn uses: the conversation's, and a
    member's own within it (in a group chat, Bob's ``/last`` is not Alice's;
    the owner's keep the key they had before people existed)."""
    key = Conversations.key(turn.channel_id or "", turn.user_id or "")
    person = turn.person_key
    return key if person is None else f"{key}@{person}"


def postprocess_commands(post: PostProcessing) -> list[Command]:
    """The ``/ext`` and ``/last`` commands over the kernel's post-processing."""

    async def ext(args: str, turn: TurnContext) -> str:
        words = args.split()
        key = results_key(turn)
        verb, rest = (words[0].lower(), words[1:]) if words else ("list", [])
        try:
            if verb == "list" and not rest:
                return await _listing(post, key)
            if verb == "activate" and len(rest) in (1, 2):
                param = rest[1] if len(rest) == 2 else None
                return await _activate(post, key, rest[0].lstrip("#").lower(), param)
            if verb == "rename" and len(rest) == 2:
                return await _rename(post, key, rest[0].lstrip("#"), rest[1].lstrip("#"))
            if verb == "deactivate" and len(rest) == 1:
                gone = await post.activations.deactivate(key, rest[0].lstrip("#"))
                return f"Deactivated #{gone.name}."
            if verb == "show" and len(rest) == 1:
                return await _source(post, key, rest[0].lstrip("#"))
        except ActivationError as exc:
            return f"Cannot do that: {exc}."
        return USAGE

    async def last(args: str, turn: TurnContext) -> str:
        key = results_key(turn)
        name = args.strip().lstrip("#").lower() or None
        found = await post.records.latest(key, name)
        if not found:
            return f"No #{name} result yet." if name else "No post-processed message yet."
        lines = [f"Results for “{_short(found[0].original)}”:"]
        for stored in found:
            result = stored.result
            took = result.metadata.get("execution_time_ms")
            status = "ok" if result.success else f"failed: {result.error}"
            lines.append(f"#{result.name} ({result.output_target}, {status}, {took} ms)")
            if result.success:
                lines.append(body(result))
        return "\n".join(lines)

    return [
        Command("ext", "answer post-processors: list, activate, rename, deactivate, show", ext),
        Command("last", "the latest post-processor results (`/last NAME` for one)", last),
    ]


async def _listing(post: PostProcessing, key: str) -> str:
    lines = ["Your post-processors (add #name or #name:param to a message):"]
    for activation in await post.activations.of(key):
        entry = post.catalog.get(activation.processor)
        where = entry.processor.output_target if entry else "not available now"
        default = f", default {activation.default_param}" if activation.default_param else ""
        lines.append(f"  #{activation.name} → {activation.processor}{default} ({where})")
    if len(lines) == 1:
        lines.append("  none")
    lines.append("Available:")
    for entry in post.catalog.entries():
        lines.append(f"  {entry.name} ({entry.owner}) — {entry.description}")
    lines.append(USAGE)
    return "\n".join(lines)


async def _activate(post: PostProcessing, key: str, processor: str, param: str | None) -> str:
    entry = post.catalog.get(processor)
    if entry is None:
        known = ", ".join(e.name for e in post.catalog.entries()) or "none"
        return f"No post-processor {processor!r}. Available: {known}."
    ok, reason = entry.processor.validate_param(param)
    if not ok:
        return f"{processor} does not take {param!r}: {reason}"
    made = await post.activations.activate(key, processor, param)
    default = f", default param {param}" if param else ""
    return f"Activated #{made.name} ({processor}{default})."


async def _rename(post: PostProcessing, key: str, old: str, new: str) -> str:
    new = new.lower()
    if not NAME_RE.match(new):
        return f"#{new} is not a valid name: lowercase letters, digits, _ and -, at most 32."
    renamed = await post.activations.rename(key, old, new)
    return f"Renamed #{old} to #{renamed.name}."


async def _source(post: PostProcessing, key: str, name: str) -> str:
    """The processor's module source; ``name`` is an activation or a processor."""
    processors = {a.name: a.processor for a in await post.activations.of(key)}
    entry = post.catalog.get(processors.get(name, name))
    if entry is None:
        return f"No post-processor or activation {name!r}; /ext lists them."
    path = inspect.getsourcefile(type(entry.processor))
    if path is None:
        return f"The source of {entry.name} is not available."
    text = await asyncio.to_thread(Path(path).read_text, encoding="utf-8")
    return f"{entry.name} ({entry.owner}), {path}:\n```python\n{text.rstrip()}\n```"


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"
