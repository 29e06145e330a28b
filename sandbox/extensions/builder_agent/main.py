"""builder_agent: a declarative agent that writes new Hearth extensions.

The manifest's ``agent:`` section drives it as for any declarative agent —
instructions (``prompt.jinja2`` + ``agent.instructions``, rendered by the
kernel), ``uses_tools``, ``limits`` and ``model`` — but the agent also needs
tools of its own that only it may hold (file access confined to one
extension directory, validation, restart). A manifest cannot carry those, so
this class is the ``AgentProvider`` and builds the ``agents.Agent`` itself,
enforcing the limits the way the kernel's declarative adapter does.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import yaml
from agents import Agent, MaxTurnsExceeded, RunContextWrapper, RunHooks, Runner
from agents.items import ModelResponse

from core.extensions.contract import (
    AgentDescriptor,
    AgentExtensionContext,
    AgentInvocationContext,
    AgentResponse,
    ExtensionContext,
)

from .tools import BuilderState, build_tools
from .workspace import Workspace

DEFAULT_LIMITS = {"max_turns": 10, "max_tokens_per_invocation": 50_000, "time_budget_ms": 120_000}


class TokenBudgetExceeded(Exception):
    def __init__(self, limit: int, used: int) -> None:
        super().__init__(f"max_tokens_per_invocation={limit} exceeded ({used} used)")
        self.limit = limit


class _TokenBudget(RunHooks[Any]):
    """Counts tokens after every model response and stops the run past the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        self.used += response.usage.total_tokens
        if self.used > self.limit:
            raise TokenBudgetExceeded(self.limit, self.used)


class BuilderAgent:
    """``Extension`` + ``AgentProvider``: writes, validates and activates new extensions."""

    def __init__(self) -> None:
        self._ctx: AgentExtensionContext | None = None
        self._state: BuilderState | None = None
        self._limits = dict(DEFAULT_LIMITS)
        self._description = ""

    # ------------------------------------------------------------- lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        ctx = cast(AgentExtensionContext, context)
        self._ctx = ctx
        own_dir = Path(ctx.extension_dir)
        manifest = yaml.safe_load((own_dir / "manifest.yaml").read_text(encoding="utf-8"))
        section = manifest.get("agent") or {}
        self._limits.update(section.get("limits") or {})
        self._description = str(manifest.get("description") or manifest["name"]).strip()
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
        )
        _ = ctx.resolved_instructions  # a broken prompt.jinja2 fails the load, naming the file

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def destroy(self) -> None:
        return None

    def health_check(self) -> bool:
        return True

    # --------------------------------------------------------- AgentProvider

    def get_agent_descriptor(self) -> AgentDescriptor:
        return AgentDescriptor(name=self._context().agent_id, description=self._description)

    async def invoke(
        self, task: str, context: AgentInvocationContext | None = None
    ) -> AgentResponse:
        limits = self._limits
        budget = _TokenBudget(int(limits["max_tokens_per_invocation"]))
        deadline = asyncio.timeout(int(limits["time_budget_ms"]) / 1000)
        try:
            agent = self._build_agent()
            async with deadline:
                result = await Runner.run(
                    agent,
                    task,
                    context=context.turn if context else None,
                    max_turns=int(limits["max_turns"]),
                    hooks=budget,
                )
        except MaxTurnsExceeded:
            return self._error(f"max_turns={limits['max_turns']} exceeded", budget)
        except TokenBudgetExceeded as exc:
            return self._error(str(exc), budget)
        except TimeoutError:
            if not deadline.expired():
                return self._error("timed out", budget)
            return self._error(f"time_budget_ms={limits['time_budget_ms']} exceeded", budget)
        except Exception as exc:
            reason = getattr(exc, "reason", None) or " ".join(str(exc).split()) or repr(exc)
            self._context().logger.warning("builder failed: %s", reason)
            return self._error(reason, budget)
        return AgentResponse(
            status="success", content=str(result.final_output or ""), tokens_used=budget.used
        )

    # -------------------------------------------------------------- helpers

    def _build_agent(self) -> Agent[Any]:
        assert self._state is not None, "initialize() was not called"
        ctx = self._context()
        return Agent(
            name=ctx.agent_id,
            instructions=ctx.resolved_instructions,
            model=ctx.model_router.get_model(ctx.agent_id, ctx.agent_model),
            tools=[*build_tools(self._state), *ctx.resolved_tools],
        )

    def _context(self) -> AgentExtensionContext:
        assert self._ctx is not None, "initialize() was not called"
        return self._ctx

    def _error(self, reason: str, budget: _TokenBudget) -> AgentResponse:
        return AgentResponse(
            status="error",
            content=f"{self._context().agent_id} stopped: {reason}",
            error=reason,
            tokens_used=budget.used,
        )
