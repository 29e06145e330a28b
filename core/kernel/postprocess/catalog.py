"""Which post-processors exist: those of the wired extensions.

The kernel has none of its own: the ones every conversation has come from the
bundled ``postprocessors`` extension like any other (ADR 0063). An extension
provides one by *being* a ``PostProcessor`` or several through
``get_post_processors()``. Each is checked before it is listed (a name users
can type, a known output target, an ``async`` ``execute`` taking
``(context, param)``); a bad one is logged with its extension and left out,
the others stay. Two extensions offering one name: the established one keeps
it (bundled first, then by grant time — ``NamePolicy``, as for tools and
commands) unless the newcomer's grant says it replaces ``#name`` from the
holder (``main.py extensions grant`` asks); the entry then says whose it
replaced. With no policy, the first in load order keeps it. The table is
rebuilt when the set of wired providers changes (an extension wired, unwired
or reloaded as a new object).

Each entry carries the processor's metadata (``metadata.py``; malformed
metadata leaves it out too) and a built-in mark: its extension is one the
project bundles (``bundled_grants.yaml``). Names in ``postprocess.disabled``
are not offered. Entries are listed by ``display_order``, then load order.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from core.extensions.access import BUNDLED_GRANTS_FILE, GrantStoreError, load_bundled_grants
from core.extensions.contract import OUTPUT_TARGETS, PostProcessor
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.lifecycle import describe_exception
from core.extensions.loading.names import NamePolicy
from core.extensions.loading.records import ExtensionRecord
from core.extensions.loading.signatures import SignatureError, check_signatures
from core.kernel.postprocess.metadata import MetadataError, ProcessorInfo
from core.kernel.postprocess.parsing import NAME_RE

__all__ = ["CatalogEntry", "PostProcessorCatalog", "problem_with", "processor_names"]

log = logging.getLogger("core.kernel.postprocess")

PROVIDES = {Capability.POST_PROCESSOR, Capability.POST_PROCESSOR_PROVIDER}


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One available post-processor, who provides it and what it does."""

    processor: PostProcessor
    owner: str  # the providing extension's id
    info: ProcessorInfo
    builtin: bool = False  # its extension is one the project bundles
    replaced: str | None = None  # the extension whose processor of this name it took

    @property
    def name(self) -> str:
        return str(self.processor.name)

    @property
    def description(self) -> str:
        """``description`` if the processor has one, else its docstring's first line."""
        return self.info.description


class PostProcessorCatalog:
    """The available post-processors by name."""

    def __init__(
        self,
        records: Callable[[], Sequence[ExtensionRecord]],
        *,
        disabled: Collection[str] = (),
        is_builtin: Callable[[str], bool] | None = None,
        names: NamePolicy | None = None,
    ) -> None:
        self._records = records
        self.disabled = frozenset(disabled)
        self._names = names
        self._is_builtin = is_builtin or _bundled
        self._table: dict[str, CatalogEntry] | None = None
        self._built_for: tuple[tuple[str, int], ...] = ()

    def get(self, name: str) -> CatalogEntry | None:
        return self._entries().get(name)

    def entries(self) -> list[CatalogEntry]:
        """The extensions' processors by ``display_order``, then load order."""
        return list(self._entries().values())

    def _entries(self) -> dict[str, CatalogEntry]:
        records = [r for r in self._records() if PROVIDES & set(r.capabilities)]
        providers = tuple((r.ext_id, id(r.instance)) for r in records)
        if self._table is None or providers != self._built_for:
            self._table, self._built_for = self._build(records), providers
        return self._table

    def _build(self, records: Sequence[ExtensionRecord]) -> dict[str, CatalogEntry]:
        table: dict[str, CatalogEntry] = {}
        for record in records:
            for processor in _provided(record):
                problem = problem_with(processor)
                if problem is None:
                    try:
                        info = ProcessorInfo.of(processor)
                    except MetadataError as exc:
                        problem = str(exc)
                if problem is not None:
                    log.error("post-processor of %s left out: %s", record.ext_id, problem)
                    continue
                name = str(processor.name)
                if name in self.disabled:
                    log.info(
                        "post-processor %s of %s disabled (postprocess.disabled)",
                        name,
                        record.ext_id,
                    )
                    continue
                holder = table.get(name)
                replaced = None
                if holder is not None:
                    keeper = holder.owner
                    if self._names is not None:
                        keeper = self._names.keeper(f"#{name}", holder.owner, record.ext_id)
                    loser = record.ext_id if keeper == holder.owner else holder.owner
                    log.warning("post-processor #%s: %s", name, self._warning(name, keeper, loser))
                    if self._names is not None and self._names.may_replace(keeper, f"#{name}"):
                        replaced = loser  # taken with the user's consent: /ext says so
                    if keeper == holder.owner:
                        table[name] = dataclasses.replace(holder, replaced=replaced)
                        continue
                table[name] = CatalogEntry(
                    processor, record.ext_id, info, self._is_builtin(record.ext_id), replaced
                )
        ordered = sorted(table.values(), key=lambda e: e.info.display_order)  # stable
        return {entry.name: entry for entry in ordered}

    def _warning(self, name: str, keeper: str, loser: str) -> str:
        if self._names is not None:
            return self._names.warning(f"#{name}", keeper, loser)
        return f"{loser}'s is ignored: {keeper} provides it"


def processor_names(record: ExtensionRecord) -> list[str]:
    """The names of the post-processors ``record``'s extension offers (for the grant
    command's question about names it would take from another extension)."""
    return [str(getattr(p, "name", "")) for p in _provided(record) if problem_with(p) is None]


@cache
def _bundled_ids() -> frozenset[str]:
    try:
        return frozenset(load_bundled_grants(BUNDLED_GRANTS_FILE))
    except GrantStoreError as exc:
        log.error("built-in post-processors not marked: %s", exc)
        return frozenset()


def _bundled(ext_id: str) -> bool:
    """Whether ``ext_id`` is one of the project's bundled extensions."""
    return ext_id in _bundled_ids()


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
