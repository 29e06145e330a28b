"""Tool stacking: several providers of one tool name, one of them active (ADR 0027).

Seed 004 stacks providers of a name by manifest ``priority`` (higher wins;
equal: the most recently loaded). ADR 0018 keeps a name with its established
provider, so an extension named ``aaa`` cannot take ``remember`` from memory.
Both hold here:

- A provider is *trusted* for a name when it is the established one among the
  current providers (``NamePolicy.established``), when the user's grant lets it
  replace that name, or when the user's ``tools.overrides`` names it with a
  priority. Only trusted providers compete: the active one is the trusted
  provider with the highest priority; equal priority — the most recently
  loaded, meaning the one installed last (bundled first, then by grant time,
  an extension holding no grant newest; then the later in load order).
- Untrusted providers are stacked below the trusted ones, whatever their
  priority: shadowed, named in ``extensions --json`` and ``/status``, and next
  in line if the trusted ones go away (then the established one among those
  left is trusted).
- The kernel's own tools are never shadowed.
- ``tools.overrides``: ``{disabled: true}`` takes the tool away;
  ``{provider: ID, disabled: true}`` takes that provider out of the stack;
  ``{provider: ID, priority: N}`` sets its priority for this tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from core.config import ToolOverride
from core.extensions.loading.names import KERNEL_OWNERS, NamePolicy

__all__ = ["NameStack", "StackResult", "stack_names"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class NameStack:
    """One tool name's providers: the active one (None: disabled), then the
    shadowed ones in stack order, and those the user took out."""

    name: str
    active: str | None
    shadowed: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()

    @property
    def contested(self) -> bool:
        """Worth showing: more than one provider, or the user changed something."""
        return bool(self.shadowed or self.disabled or self.active is None)

    def as_json(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "shadowed": list(self.shadowed),
            "disabled": list(self.disabled),
        }

    def describe(self) -> str:
        """``remember: memory (shadowed: aaa)`` for ``/status``."""
        if self.active is None:
            return f"{self.name}: disabled (tools.overrides)"
        parts = []
        if self.shadowed:
            parts.append(f"shadowed: {', '.join(self.shadowed)}")
        if self.disabled:
            parts.append(f"disabled: {', '.join(self.disabled)}")
        return f"{self.name}: {self.active}" + (f" ({'; '.join(parts)})" if parts else "")


@dataclass(frozen=True, slots=True)
class StackResult(Generic[T]):
    """What survives (``(owner, items)`` in the given order), every stack, and
    log lines: ``warnings`` (an untrusted provider held below), ``notes``."""

    sources: list[tuple[str, list[T]]]
    stacks: dict[str, NameStack]
    warnings: list[str]
    notes: list[str]


def stack_names(
    sources: Sequence[tuple[str, Sequence[T]]],
    name_of: Callable[[T], str],
    policy: NamePolicy,
    priority_of: Callable[[str], int],
    overrides: Mapping[str, ToolOverride],
) -> StackResult[T]:
    """Resolve every name's stack; ``sources`` are ``(owner, items)`` in load order."""
    providers: dict[str, list[str]] = {}
    for owner, items in sources:
        for item in items:
            owners = providers.setdefault(name_of(item), [])
            if owner not in owners:
                owners.append(owner)
    loaded = {owner: index for index, (owner, _) in enumerate(sources)}
    stacks: dict[str, NameStack] = {}
    warnings: list[str] = []
    notes: list[str] = []
    for name, owners in providers.items():
        resolver = _Resolver(name, owners, policy, priority_of, overrides.get(name), loaded)
        stacks[name] = resolver.stack()
        warnings.extend(resolver.warnings())
        notes.extend(resolver.notes())
    for name, override in overrides.items():
        problem = _unused(name, override, providers.get(name, []))
        if problem:
            warnings.append(problem)
    kept = [
        (owner, [item for item in items if stacks[name_of(item)].active == owner])
        for owner, items in sources
    ]
    return StackResult(kept, stacks, warnings, notes)


class _Resolver:
    """One name's stack."""

    def __init__(
        self,
        name: str,
        owners: list[str],
        policy: NamePolicy,
        priority_of: Callable[[str], int],
        override: ToolOverride | None,
        loaded: Mapping[str, int],
    ) -> None:
        self.name = name
        self.policy = policy
        self.override = override
        taken_out: tuple[str | None, ...] = ()
        if override is not None and override.disabled:
            taken_out = (None,) if override.provider is None else (override.provider,)
        self.disabled = [o for o in owners if None in taken_out or o in taken_out]
        self.candidates = [o for o in owners if o not in self.disabled]
        self.priority = {o: self._priority(o, priority_of) for o in self.candidates}
        self.incumbent = policy.established(self.candidates) if self.candidates else None
        self.order = sorted(
            self.candidates,
            key=lambda o: (
                o in KERNEL_OWNERS,
                self.trusted(o),
                self.priority[o],
                policy.order(o),
                loaded.get(o, -1),
            ),
            reverse=True,
        )

    def _priority(self, owner: str, priority_of: Callable[[str], int]) -> int:
        override = self.override
        if override is not None and override.provider == owner and override.priority is not None:
            return override.priority
        return 100 if owner in KERNEL_OWNERS else priority_of(owner)

    def trusted(self, owner: str) -> bool:
        override = self.override
        return (
            owner == self.incumbent
            or self.policy.may_replace(owner, self.name)
            or (
                override is not None
                and override.provider == owner
                and override.priority is not None
            )
        )

    def stack(self) -> NameStack:
        active = self.order[0] if self.order else None
        return NameStack(self.name, active, tuple(self.order[1:]), tuple(self.disabled))

    def warnings(self) -> list[str]:
        """One line per provider held below the active one for want of trust."""
        if not self.order:
            return []
        active = self.order[0]
        return [
            self.policy.warning(self.name, active, other)
            + ("" if active in KERNEL_OWNERS else " (shadowed; tools.overrides can change that)")
            for other in self.order[1:]
            if not self.trusted(other) or active in KERNEL_OWNERS
        ]

    def notes(self) -> list[str]:
        """The ordinary stacking among trusted providers, and what the user disabled."""
        lines = []
        trusted_shadowed = [o for o in self.order[1:] if self.trusted(o)]
        if self.order and trusted_shadowed and self.order[0] not in KERNEL_OWNERS:
            ranked = ", ".join(f"{o} ({self.priority[o]})" for o in trusted_shadowed)
            lines.append(
                f"tool {self.name}: {self.order[0]} (priority {self.priority[self.order[0]]}) "
                f"is active; shadowed: {ranked}"
            )
        if self.disabled:
            lines.append(f"tool {self.name}: tools.overrides disables {', '.join(self.disabled)}")
        return lines


def _unused(name: str, override: ToolOverride, owners: list[str]) -> str | None:
    """Why a ``tools.overrides`` entry changes nothing, if it does not."""
    where = f"tools.overrides.{name}"
    if not owners:
        return (
            f"{where}: no extension or kernel tool is named {name!r} (MCP tools: use allowed_tools)"
        )
    if override.provider is not None and override.provider not in owners:
        return (
            f"{where}: {override.provider!r} does not provide {name!r} "
            f"(its providers: {', '.join(owners)})"
        )
    if override.provider in KERNEL_OWNERS and override.priority is not None:
        return f"{where}: the kernel's own tools are not stacked; only disabled: true applies"
    return None
