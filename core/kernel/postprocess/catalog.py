"""Which post-processors exist: the built-ins, then those of wired extensions.

An extension provides one by *being* a ``PostProcessor`` or several through
``get_post_processors()``. Each is checked before it is listed (a name users
can type, a known output target, an ``async`` ``execute`` taking
``(context, param)``); a bad one is logged with its extension and left out,
the others stay. A name is kept by whoever listed it first (built-ins, then
extensions in load order). The table is rebuilt when the set of wired
providers changes (an extension wired, unwired or reloaded as a new object).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from core.extensions.contract import OUTPUT_TARGETS, PostProcessor
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.lifecycle import describe_exception
from core.extensions.loading.records import ExtensionRecord
from core.extensions.loading.signatures import SignatureError, check_signatures
from core.kernel.postprocess.parsing import NAME_RE

__all__ = ["BUILTIN_OWNER", "CatalogEntry", "PostProcessorCatalog", "problem_with"]

log = logging.getLogger("core.kernel.postprocess")

BUILTIN_OWNER = "built-in"
PROVIDES = {Capability.POST_PROCESSOR, Capability.POST_PROCESSOR_PROVIDER}


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One available post-processor, who provides it and what it does."""

    processor: PostProcessor
    owner: str  # ``built-in`` or an extension id

    @property
    def name(self) -> str:
        return str(self.processor.name)

    @property
    def description(self) -> str:
        """``description`` if the processor has one, else its docstring's first line."""
        processor = self.processor
        text = getattr(processor, "description", None) or inspect.getdoc(type(processor)) or ""
        lines = str(text).strip().splitlines()
        return lines[0] if lines else ""


class PostProcessorCatalog:
    """The available post-processors by name."""

    def __init__(
        self,
        builtins: Sequence[PostProcessor],
        records: Callable[[], Sequence[ExtensionRecord]] = lambda: (),
    ) -> None:
        self._builtins = list(builtins)
        self._records = records
        self._table: dict[str, CatalogEntry] | None = None
        self._built_for: tuple[tuple[str, int], ...] = ()

    def get(self, name: str) -> CatalogEntry | None:
        return self._entries().get(name)

    def entries(self) -> list[CatalogEntry]:
        """Built-ins first, then extensions' processors in load order."""
        return list(self._entries().values())

    def builtin_names(self) -> list[str]:
        return [str(p.name) for p in self._builtins]

    def _entries(self) -> dict[str, CatalogEntry]:
        records = [r for r in self._records() if PROVIDES & set(r.capabilities)]
        providers = tuple((r.ext_id, id(r.instance)) for r in records)
        if self._table is None or providers != self._built_for:
            self._table, self._built_for = self._build(records), providers
        return self._table

    def _build(self, records: Sequence[ExtensionRecord]) -> dict[str, CatalogEntry]:
        table = {str(p.name): CatalogEntry(p, BUILTIN_OWNER) for p in self._builtins}
        for record in records:
            for processor in _provided(record):
                problem = problem_with(processor)
                if problem is not None:
                    log.error("post-processor of %s left out: %s", record.ext_id, problem)
                    continue
                name = str(processor.name)
                holder = table.get(name)
                if holder is not None:
                    log.warning(
                        "post-processor %r of %s ignored: %s provides it",
                        name,
                        record.ext_id,
                        holder.owner,
                    )
                    continue
                table[name] = CatalogEntry(processor, record.ext_id)
        return table


def _provided(record: ExtensionRecord) -> list[Any]:
    found: list[Any] = []
    if Capability.POST_PROCESSOR in record.capabilities:
        found.append(record.instance)
    if Capability.POST_PROCESSOR_PROVIDER in record.capabilities:
        try:
            found.extend(record.instance.get_post_processors())
        except Exception as exc:
            log.error(
                "get_post_processors of %s failed: %s", record.ext_id, describe_exception(exc)
            )
    return found


def problem_with(processor: Any) -> str | None:
    """Why ``processor`` cannot be offered, or ``None`` when it is a good one."""
    if not isinstance(processor, PostProcessor):
        return f"{processor!r} lacks name, output_target, validate_param or execute"
    name = getattr(processor, "name", None)
    if not isinstance(name, str) or not NAME_RE.match(name):
        return f"name {name!r} is not lowercase letters, digits, _ or - (at most 32)"
    if processor.output_target not in OUTPUT_TARGETS:
        return f"{name}: output_target {processor.output_target!r} is not one of {OUTPUT_TARGETS}"
    if not inspect.iscoroutinefunction(processor.execute):
        return f"{name}: execute must be `async def`"
    try:
        check_signatures(processor, PostProcessor)
    except SignatureError as exc:
        return str(exc)
    return None
