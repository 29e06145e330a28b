"""builder_agent: a declarative agent that writes new Hearth extensions.

The manifest's ``agent:`` section drives it as for any declarative agent —
instructions (``prompt.jinja2`` + ``agent.instructions``), ``uses_tools``,
``limits`` and ``model`` — but the agent also needs tools of its own that
only it may hold (file access confined to one extension directory,
validation, restart). A manifest cannot carry those, so this class is the
``AgentProvider`` and hands them to ``context.run_agent``, which runs the
manifest's agent with the kernel's limit enforcement.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import cast

from core.extensions.contract import (
    AgentDescriptor,
    AgentExtensionContext,
    AgentInvocationContext,
    AgentResponse,
    ExtensionContext,
)
from core.extensions.sdk import BaseExtension

from .tools import BuilderState, build_tools
from .workspace import Workspace


class BuilderAgent(BaseExtension):
    """``Extension`` + ``AgentProvider``: writes, validates and activates new extensions."""

    def __init__(self) -> None:
        self._state: BuilderState | None = None

    # ------------------------------------------------------------- lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        ctx = cast(AgentExtensionContext, context)
        own_dir = Path(ctx.extension_dir)
        workspace = Workspace(
            own_dir.parent,
            ctx.data_dir,
            own_id=ctx.extension_id,
            max_file_bytes=int(ctx.get_config("max_file_bytes", 200_000)),
        )
        self._state = BuilderState(
            workspace=workspace,
            request_restart=ctx.request_restart,
            validation_timeout_s=float(ctx.get_config("validation_timeout_s", 60)),
            # the kernel's reload (ADR 0032), when this context offers it
            request_reload=getattr(ctx, "request_reload", None),
            loaded_at_start=frozenset(await asyncio.to_thread(_extension_ids, own_dir.parent)),
            confirm=self._confirm,
        )
        _ = ctx.resolved_instructions  # a broken prompt.jinja2 fails the load, naming the file

    # --------------------------------------------------------- AgentProvider

    def get_agent_descriptor(self) -> AgentDescriptor:
        return self._context().agent_descriptor

    async def invoke(
        self, task: str, context: AgentInvocationContext | None = None
    ) -> AgentResponse:
        assert self._state is not None, "initialize() was not called"
        return await self._context().run_agent(task, context, extra_tools=build_tools(self._state))

    async def _confirm(self, question: str) -> bool:
        """The owner's yes or no (``ui_request``); no answer, or nobody to ask, is a no."""
        try:
            answer = await self._context().ui_request("confirm", question)
        except Exception as exc:
            self._context().logger.warning("could not ask the owner: %s", exc)
            return False
        return answer == "yes"

    def _context(self) -> AgentExtensionContext:
        return cast(AgentExtensionContext, self.context)


def _extension_ids(root: Path) -> list[str]:
    """The extension directories (with a manifest) under ``root`` now."""
    return [p.name for p in root.iterdir() if (p / "manifest.yaml").is_file()]
