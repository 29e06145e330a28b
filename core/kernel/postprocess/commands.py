"""``/ext`` and ``/last``: managing activations and reading results, with no model.

``/ext`` lists the user's activations and what can be activated;
``/ext activate NAME [PARAM]`` adds one (auto-named ``json``, ``json2``, …,
PARAM its default, checked against the processor's metadata and by the
processor); ``/ext set NAME [PARAM]`` changes (or clears) that default;
``/ext rename OLD NEW``, ``/ext deactivate NAME``; ``/ext info NAME`` shows
the processor's metadata, ``/ext show NAME`` its source.
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
    from core.kernel.postprocess.catalog import CatalogEntry
    from core.kernel.postprocess.service import PostProcessing

__all__ = ["activations_key", "postprocess_commands", "results_key"]

USAGE = (
    "Usage: /ext · /ext activate NAME [PARAM] · /ext set NAME [PARAM] · "
    "/ext rename OLD NEW · /ext deactivate NAME · /ext info NAME · /ext show NAME"
)


def results_key(turn: TurnContext) -> str:
    """Whose activations and results a turn uses: the conversation's, and a
    member's own within it (in a group chat, Bob's ``/last`` is not Alice's;
    the owner's keep the key they had before people existed)."""
    key = Conversations.key(turn.channel_id or "", turn.user_id or "")
    person = turn.person_key
    return key if person is None else f"{key}@{person}"


def activations_key(turn: TurnContext) -> tuple[str, str]:
    """Whose activations a turn uses, and where they were kept before: the person's
    (``person:NAME``, the same on every channel), copied once from the
    conversation's (``results_key``); a turn with no person keeps the latter."""
    legacy = results_key(turn)
    return (f"person:{turn.person}" if turn.person else legacy), legacy


def postprocess_commands(post: PostProcessing) -> list[Command]:
    """The ``/ext`` and ``/last`` commands over the kernel's post-processing."""

    async def ext(args: str, turn: TurnContext) -> str:
        words = args.split()
        key, legacy = activations_key(turn)
        verb, rest = (words[0].lower(), words[1:]) if words else ("list", [])
        try:
            await post.activations.of(key, legacy)  # a person's first read adopts them
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
            if verb == "set" and len(rest) in (1, 2):
                param = rest[1] if len(rest) == 2 else None
                return await _set(post, key, rest[0].lstrip("#").lower(), param)
            if verb == "info" and len(rest) == 1:
                return await _info(post, key, rest[0].lstrip("#").lower())
            if verb == "show" and len(rest) == 1:
                if turn.role != "owner":  # extension code is the owner's to read (issue 46)
                    return "Only the owner can read a post-processor's source."
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
        Command(
            "ext",
            "answer post-processors: list, activate, set, rename, deactivate, info, show",
            ext,
        ),
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
        mark = "built-in" if entry.builtin else f"from {entry.owner}"
        if entry.replaced:
            mark += f", replacing {entry.replaced}'s"
        lines.append(f"  {entry.name} [{entry.info.category}, {mark}] — {entry.description}")
    lines.append(USAGE)
    return "\n".join(lines)


async def _activate(post: PostProcessing, key: str, processor: str, param: str | None) -> str:
    entry = post.catalog.get(processor)
    if entry is None:
        known = ", ".join(e.name for e in post.catalog.entries()) or "none"
        return f"No post-processor {processor!r}. Available: {known}."
    refused = _refusal(entry, param)
    if refused is not None:
        return refused
    made = await post.activations.activate(key, processor, param)
    default = f", default param {param}" if param else ""
    return f"Activated #{made.name} ({processor}{default})."


def _refusal(entry: CatalogEntry, param: str | None) -> str | None:
    """Why ``entry`` does not take ``param`` as a default (its metadata, then its
    own check), or ``None``."""
    reason = entry.info.refuses(param)
    if reason is None:
        ok, said = entry.processor.validate_param(param)
        reason = None if ok else said or "refused"
    return None if reason is None else f"{entry.name} does not take {param!r}: {reason}"


async def _set(post: PostProcessing, key: str, name: str, param: str | None) -> str:
    """``/ext set NAME [PARAM]``: the activation's default param, checked first."""
    activations = {a.name: a for a in await post.activations.of(key)}
    current = activations.get(name)
    if current is None:
        return f"You have no #{name}; /ext lists your activations."
    entry = post.catalog.get(current.processor)
    if entry is None:
        return f"#{name} runs {current.processor}, which is not available now."
    refused = _refusal(entry, param)
    if refused is not None:
        return refused
    changed = await post.activations.set_param(key, name, param)
    if changed.default_param is None:
        return f"#{name} has no default param now."
    return f"#{name} runs with {changed.default_param} by default now."


async def _info(post: PostProcessing, key: str, name: str) -> str:
    """``/ext info NAME``: a processor's metadata (``name``: an activation or a processor)."""
    processors = {a.name: a for a in await post.activations.of(key)}
    activation = processors.get(name)
    entry = post.catalog.get(activation.processor if activation else name)
    if entry is None:
        return f"No post-processor or activation {name!r}; /ext lists them."
    info = entry.info
    mark = "built-in" if entry.builtin else f"from the extension {entry.owner}"
    if entry.replaced:
        mark += f" (replacing {entry.replaced}'s, as its grant allows)"
    version = f" v{info.version}" if info.version else ""
    lines = [
        f"{info.display_name} (#{entry.name}){version} — {info.category}, {mark}",
        info.description or "(no description)",
        f"Output: {entry.processor.output_target}",
    ]
    if not info.takes_param:
        lines.append("Param: none")
    else:
        allowed = ", ".join(info.allowed_values) if info.allowed_values else "any"
        about = f" — {info.param_description}" if info.param_description else ""
        lines.append(f"Param: {allowed}{about}")
        if info.examples:
            lines.append(f"Examples: {', '.join(f'#{entry.name}:{e}' for e in info.examples)}")
    if info.keywords:
        lines.append(f"Keywords: {', '.join(info.keywords)}")
    if info.output_schema is not None:
        lines.append("Output schema: declared (checked on every result)")
    if activation is not None:
        default = activation.default_param or "none"
        lines.append(f"Your #{activation.name}: default param {default}")
    return "\n".join(lines)


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
