"""The one table of the turn pipeline's hook points (SPEC §9; issue 27, ADR 0041).

Each row says, once, what a hook point is: its protocol (``contract.hooks``),
the method the kernel awaits, the kinds of its positional arguments and of
the results it may return besides ``None``, how several hooks at the point
combine, data its owner reports at load, the ``hooks.commands`` event name
when a program may implement it, the permission it needs and its docs
wording. The rows are written as ``@hook_point(...)`` on the protocols in
``contract.hooks`` (issue 42, ADR 0084); this module is their table, in
declaration order. Everything else is built from it: the ``Capability``
members and the capability detection (``loading.capabilities``), the
settings' hook names (``core.config``), the isolated proxy and the plugin
host (``isolation.kernel.hook_mixins``, ``isolation.host.plugin_host``), the
wire codec (``isolation.protocol.hook_wire``), the command-hook targets
(``core.kernel.hooks.command_hooks``), the permission check
(``loading.capabilities.require_permissions``) and docs/hooks.md's table
(``loading.docs_tables``). Adding a hook point means a decorated protocol in
``contract.hooks`` and the kernel code that calls it (plus a target class in
``core/kernel/hooks/command_hooks.py`` when programs may implement it). Light:
the plugin host imports it before the extension.
"""

from __future__ import annotations

from core.extensions.contract import hooks
from core.extensions.contract.hook_declaration import (
    CONVERSATIONS,
    ArgKind,
    Chaining,
    HookSpec,
    ResultKind,
    declared_hook_specs,
)

__all__ = [
    "CONVERSATIONS",
    "HOOK_SPECS",
    "ArgKind",
    "Chaining",
    "HookSpec",
    "ResultKind",
]

HOOK_SPECS: tuple[HookSpec, ...] = declared_hook_specs(hooks)
