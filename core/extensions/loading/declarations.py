"""What a manifest may declare beyond its schema (ADR 0044).

A manifest speaks only for its own tools, and its event subscriptions get
no more than the same subscriptions made in code.

``tools.<name>.side_effects`` tells consent whether a call of that tool needs
the user's yes. Only the extension that provides a tool may say so for it
(the person running Hearth says it for any tool in settings,
``policy.side_effects``): a manifest that names another extension's tool or
an MCP server's tool could otherwise relabel it as harmless. So once an
extension's code has said what it provides (``get_tools`` and its agent), a
``tools.<name>`` it does not provide is a load error naming the file and the
field, checked by the loader at start and by a reload.

``events.subscribes`` is wired by the kernel, not by the extension's code, so
it must pass the checks the context makes of the code: the topic within
``permissions.subscribe``, and ``notify_user`` only with ``permissions.notify``
(the wiring then spends the notification rate limit per message). A
subscription that fails them is a load error naming the entry, found before
any of the extension's code runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.events.topics import pattern_within
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.manifest import (
    MANIFEST_FILE,
    Manifest,
    ManifestError,
    ResolvedPermissions,
)
from core.extensions.tool_names import sanitize_tool_name

__all__ = ["check_subscriptions", "check_tool_declarations", "provided_tool_names"]


def provided_tool_names(
    ext_id: str, instance: Any, capabilities: Sequence[Capability], tools: Sequence[Any]
) -> list[str]:
    """The names the model sees from this extension: its tools and its agent's tool."""
    names = [str(getattr(tool, "name", tool)) for tool in tools]
    if Capability.AGENT in capabilities:
        names.append(sanitize_tool_name(instance.get_agent_descriptor().name, ext_id))
    return names


def check_tool_declarations(
    manifest: Manifest,
    ext_dir: Path,
    instance: Any,
    capabilities: Sequence[Capability],
    tools: Sequence[Any],
) -> None:
    """Raise ``ManifestError`` naming ``tools.<name>`` when the manifest declares a
    tool the extension does not provide."""
    if not manifest.tools:
        return
    provided = provided_tool_names(manifest.id, instance, capabilities, tools)
    foreign = sorted(name for name in manifest.tools if name not in provided)
    if foreign:
        fields = ", ".join(f"tools.{name}" for name in foreign)
        raise ManifestError(
            ext_dir / MANIFEST_FILE,
            f"{fields}: {manifest.id} provides no tool of that name (its tools: "
            f"{', '.join(provided) or 'none'}); a manifest declares side effects and "
            "effects only for its own tools (settings policy.side_effects speaks for any tool)",
        )


def check_subscriptions(
    manifest: Manifest, ext_dir: Path, permissions: ResolvedPermissions
) -> None:
    """Raise ``ManifestError`` naming ``events.subscribes.N`` when an entry asks for
    what the same call from code would be refused (``permissions`` as resolved)."""
    for index, sub in enumerate(manifest.events.subscribes):
        where = f"events.subscribes.{index}"
        if not any(pattern_within(sub.topic, p) for p in permissions.subscribe):
            allowed = ", ".join(permissions.subscribe) or "none"
            raise ManifestError(
                ext_dir / MANIFEST_FILE,
                f"{where}.topic: {sub.topic!r} is outside permissions.subscribe ({allowed})",
            )
        if sub.handler == "notify_user" and not permissions.notify:
            raise ManifestError(
                ext_dir / MANIFEST_FILE,
                f"{where}.handler: notify_user needs permissions.notify (it is false)",
            )
