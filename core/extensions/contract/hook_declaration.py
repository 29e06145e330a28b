"""How a hook point is declared: ``@hook_point(...)`` on its protocol (issue 42).

A hook point is said once, where its protocol is written
(``contract.hooks``): the decorator records the row — the method the kernel
awaits, the kinds of its arguments and results, how several hooks combine,
data its owner reports at load, the ``hooks.commands`` event, the permission
and the two phrases of the docs table (when it runs, what its answer does).
``hook_specs.HOOK_SPECS`` is these rows in declaration order, and everything
else is built from it (see there). Light: the plugin host imports it before
the extension.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Final, Literal, TypeVar

__all__ = [
    "CONVERSATIONS",
    "ArgKind",
    "Chaining",
    "HookSpec",
    "ResultKind",
    "declared_hook_specs",
    "hook_point",
]

# the wire shape of one argument (``isolation/hook_wire``): a ``TurnContext``, a
# ``TurnOutcome``, a ``ToolCall``, a list of message dicts, a string, string attributes
ArgKind = Literal["turn", "outcome", "call", "messages", "text", "attrs"]
# a contract value a hook may return besides None, by its wire tag
ResultKind = Literal[
    "text",
    "messages",
    "short_circuit",
    "tool_decision",
    "annotated",
    "model_route",
    "compaction_plan",
    "guardrail_trip",
]
# how the hooks at one point combine, in priority order:
# observe — each is told, answers are ignored; chain — each gets what the previous
# returned, and a stopping answer (ShortCircuit, deny) ends it; first — the first
# answer that is not None is used; advise — every answer is logged, and used only
# where settings let that extension decide (hooks.authoritative_routing)
Chaining = Literal["observe", "chain", "first", "advise"]

# the manifest permission that lets an extension see or change turns (SPEC §6)
CONVERSATIONS: Final = "conversations"

P = TypeVar("P", bound=type)


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One hook point: everything the kernel, the plugin host, the grant and the docs need."""

    protocol: type
    method: str
    args: tuple[ArgKind, ...]
    results: tuple[ResultKind, ...] = ()  # beside None; () for the observing hooks
    chaining: Chaining = "observe"
    attributes: tuple[str, ...] = ()  # sequences of strings its owner reports at load
    command_event: str | None = None  # ``hooks.commands`` may run a program for it
    permission: str = CONVERSATIONS
    when: str = ""  # docs/hooks.md's "when" column
    returns: str = "ignored"  # docs/hooks.md's "return" column

    @property
    def capability(self) -> str:
        """The public capability name (``extensions --json``, the plugin-host RPC)."""
        return self.protocol.__name__

    @property
    def member(self) -> str:
        """Its ``Capability`` member's name: ``TagHook`` → ``TAG``, ``LlmOutputHook`` →
        ``LLM_OUTPUT``."""
        stem = self.capability.removesuffix("Hook")
        return "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(stem)).upper()


# protocol -> its row, filled as ``contract.hooks`` is imported (declaration order)
_DECLARED: dict[type, HookSpec] = {}


def hook_point(
    method: str,
    args: tuple[ArgKind, ...],
    results: tuple[ResultKind, ...] = (),
    chaining: Chaining = "observe",
    *,
    when: str,
    returns: str = "ignored",
    attributes: tuple[str, ...] = (),
    command_event: str | None = None,
    permission: str = CONVERSATIONS,
) -> Callable[[P], P]:
    """Declare the decorated protocol a hook point (its row of ``HOOK_SPECS``).

    Raises ``TypeError`` naming the protocol when ``method`` is not one of its
    members, or when the protocol is declared twice.
    """

    def declare(protocol: P) -> P:
        if method not in vars(protocol):
            raise TypeError(f"@hook_point: {protocol.__name__} declares no method {method!r}")
        if protocol in _DECLARED:
            raise TypeError(f"@hook_point: {protocol.__name__} is declared twice")
        _DECLARED[protocol] = HookSpec(
            protocol,
            method,
            args,
            results,
            chaining,
            attributes,
            command_event,
            permission,
            when,
            returns,
        )
        return protocol

    return declare


def declared_hook_specs(module: ModuleType) -> tuple[HookSpec, ...]:
    """The hook points ``module`` declares, in declaration order."""
    return tuple(s for p, s in _DECLARED.items() if p.__module__ == module.__name__)
