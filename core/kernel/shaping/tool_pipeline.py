"""The layers of a tool call, declared once, outermost first (ADR 0079).

A tool call the model makes crosses layers, each a ``wrap(tool) -> tool``; the
list below is their order and the only place that says it, as Starlette's
middleware list says the order of its middleware. Each row names the layer,
what it is for, when it is on (``ToolFeatures``, read from the settings and
the skills once at assembly) and how it is built from the kernel's parts
(``ToolParts``). A feature that is off adds no layer: its cost is nothing,
as ``LocalScale``'s is for scale-out (ADR 0036), not a layer that asks "am I
on?" at every call.

- ``skills``: while a skill with ``allowed-tools`` is active, other tools are
  refused (ADR 0058); only when a skill is installed;
- ``consent``: the SDK's ``needs_approval`` through the consent gate (ADR 0021);
  only when something can be asked or denied (``policy.profile: safe``, or a
  rule). Under ``full_auto`` with no rules the hooks' admission is
  ``FullAutoGate``: the owner's calls run with no lookup;
- ``hooks``: ``before_tool_call`` / ``after_tool_call`` (ADR 0019), after the
  admission (the gate's check of every agent's calls);
- ``replay``: the replay recorder's tap (ADR 0033); only while ``replay.record``;
- ``tool_runs``: a tool that ran runs once, even across a crash (ADR 0061).

Innermost is the tool's own invoker: an extension's goes through its
permission gate (``CallGate``, built with the extension's tools). The
orchestrator's tools get every layer that is on; a declarative agent's tools
(``agents=False`` rows left out) cannot pause for a question, so consent is
only their admission inside the hooks, and skills do not narrow them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from agents import FunctionTool, Tool

from core.config import Settings
from core.kernel.consent.gate import ConsentGate
from core.kernel.hooks import ToolInterceptor, ToolTap, is_intercepted
from core.skills import ActiveSkills

__all__ = [
    "TOOL_LAYERS",
    "LayerWrapper",
    "ToolFeatures",
    "ToolLayer",
    "ToolParts",
    "ToolPipeline",
    "consent_asks",
    "layers_on",
]

_TAPPED: Final = "__hearth_tapped_by__"  # on the invoker a tap layer made: the tap
_PIPED: Final = "_hearth_piped_by"  # on a tool this pipeline wrapped: the pipeline


@dataclass(frozen=True, slots=True)
class ToolFeatures:
    """Which optional layers are on, chosen once at assembly."""

    skills: bool  # a skill is installed
    consent: bool  # a call can be asked about or denied by the policy
    replay: bool  # replay.record

    @classmethod
    def of(cls, settings: Settings, *, skills: bool) -> ToolFeatures:
        return cls(skills=skills, consent=consent_asks(settings), replay=settings.replay.record)


def consent_asks(settings: Settings) -> bool:
    """Whether the policy can ever ask or deny: ``full_auto`` with no rules allows every
    call but the owner's tools in a member's turn (``FullAutoGate`` keeps that)."""
    policy = settings.policy
    return policy.profile != "full_auto" or bool(policy.rules)


class LayerWrapper(Protocol):
    """One layer: ``wrap`` a tool; ``wraps`` whether a tool already passed it."""

    def wrap(self, tool: Tool) -> Tool: ...

    def wraps(self, tool: FunctionTool) -> bool: ...


@dataclass(frozen=True, slots=True)
class ToolParts:
    """What the layers are built from (the kernel's, once)."""

    skills: ActiveSkills
    gate: ConsentGate
    hooks: ToolInterceptor  # its admission: the gate, or ``FullAutoGate`` over it
    recorder: ToolTap
    tool_runs: ToolTap


@dataclass(frozen=True, slots=True)
class ToolLayer:
    """One row of ``TOOL_LAYERS``."""

    name: str
    what: str  # one line, for ``doctor --verbose``
    on: Callable[[ToolFeatures], bool]
    build: Callable[[ToolParts], LayerWrapper]
    agents: bool = True  # also around a declarative agent's tools


def _always(features: ToolFeatures) -> bool:
    return True


# outermost first
TOOL_LAYERS: Final[tuple[ToolLayer, ...]] = (
    ToolLayer(
        "skills",
        "an active skill's allowed-tools refuse the others (ADR 0058)",
        lambda f: f.skills,
        lambda p: _Skills(p.skills),
        agents=False,
    ),
    ToolLayer(
        "consent",
        "needs_approval: the policy asks the user or denies (ADR 0021)",
        lambda f: f.consent,
        lambda p: _Consent(p.gate, p.hooks),
        agents=False,
    ),
    ToolLayer(
        "hooks",
        "the gate's admission, then before_tool_call / after_tool_call (ADR 0019)",
        _always,
        lambda p: _Hooks(p.hooks),
    ),
    ToolLayer(
        "replay",
        "the replay recorder sees each tool run (ADR 0033)",
        lambda f: f.replay,
        lambda p: _Tap(p.recorder),
    ),
    ToolLayer(
        "tool_runs",
        "a tool that ran runs once, even across a crash (ADR 0061)",
        _always,
        lambda p: _Tap(p.tool_runs),
    ),
)


def layers_on(features: ToolFeatures, *, agents: bool = False) -> tuple[ToolLayer, ...]:
    """The rows of ``TOOL_LAYERS`` that are on, outermost first: the orchestrator's, or
    (``agents``) a declarative agent's."""
    return tuple(row for row in TOOL_LAYERS if row.on(features) and (row.agents or not agents))


class ToolPipeline:
    """The layers that are on, outermost first; ``wrap`` gives a tool all of them once."""

    def __init__(self, layers: Sequence[tuple[str, LayerWrapper]]) -> None:
        self.layers = tuple(layers)

    @classmethod
    def build(
        cls, parts: ToolParts, features: ToolFeatures, *, agents: bool = False
    ) -> ToolPipeline:
        """The orchestrator's pipeline, or (``agents``) a declarative agent's."""
        return cls([(row.name, row.build(parts)) for row in layers_on(features, agents=agents)])

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.layers)

    def wrap(self, tool: Tool) -> Tool:
        """``tool`` inside every layer, innermost first; a tool that already passed a
        layer (wrapped where it was built, then again at each step) gets only the
        layers outside it, so each runs once per call."""
        if not isinstance(tool, FunctionTool) or tool.__dict__.get(_PIPED) is self:
            return tool  # the orchestrator's tools, offered again at each step
        outside = self.layers
        for index, (_, layer) in enumerate(self.layers):
            if layer.wraps(tool):
                outside = self.layers[:index]
                break
        wrapped: Tool = tool
        for _, layer in reversed(outside):
            wrapped = layer.wrap(wrapped)
        if wrapped is not tool:  # a copy: marking it leaves ``tool`` as it was
            wrapped.__dict__[_PIPED] = self
        return wrapped


class _Skills:
    def __init__(self, active: ActiveSkills) -> None:
        self._active = active

    def wrap(self, tool: Tool) -> Tool:
        return self._active.wrap(tool)

    def wraps(self, tool: FunctionTool) -> bool:
        return self._active.scopes(tool)


class _Consent:
    def __init__(self, gate: ConsentGate, hooks: ToolInterceptor) -> None:
        self._gate = gate
        self._hooks = hooks

    def wrap(self, tool: Tool) -> Tool:
        return self._gate.guard(tool, self._hooks)

    def wraps(self, tool: FunctionTool) -> bool:
        return self._gate.guards(tool)


class _Hooks:
    def __init__(self, hooks: ToolInterceptor) -> None:
        self._hooks = hooks

    def wrap(self, tool: Tool) -> Tool:
        return self._hooks.wrap(tool)

    def wraps(self, tool: FunctionTool) -> bool:
        return is_intercepted(tool)


class _Tap:
    """A ``ToolTap`` (an invoker around the tool's own) as a layer."""

    def __init__(self, tap: ToolTap) -> None:
        self._tap = tap

    def wrap(self, tool: Tool) -> Tool:
        if not isinstance(tool, FunctionTool) or self.wraps(tool):
            return tool
        tapped = copy.copy(tool)
        invoke: Any = self._tap.tap(tool, tapped.on_invoke_tool)
        setattr(invoke, _TAPPED, self._tap)
        tapped.on_invoke_tool = invoke
        return tapped

    def wraps(self, tool: FunctionTool) -> bool:
        return getattr(tool.on_invoke_tool, _TAPPED, None) is self._tap
