"""Declarative agents: a manifest ``agent:`` section run as an ``AgentProvider``.

Instructions are ``prompt.jinja2`` (rendered with ``agent.parameters``) then
``agent.instructions``; tools come from ``uses_tools`` through the loader; the
model is resolved at each invocation. The three limits are enforced here and
every failure comes back as ``AgentResponse(status="error")`` — ``invoke``
never raises and never outlives ``time_budget_ms``. With an ``interceptor``
(the kernel's tool hooks) the agent's own tool calls run the hooks too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents import Agent, MaxTurnsExceeded, RunContextWrapper, RunHooks, Runner, Tool
from agents.items import ModelResponse

from core.agents.errors import ModelNotConfiguredError, TokenBudgetExceededError
from core.agents.hooked import HookedAgent, ToolWrapper
from core.agents.model_router import ModelRouter
from core.agents.prompts import PromptTemplate
from core.extensions.contract import (
    AgentDescriptor,
    AgentInvocationContext,
    AgentResponse,
    ExtensionContext,
)
from core.extensions.loading.manifest import MANIFEST_FILE, AgentSection, Manifest
from core.extensions.tool_failures import reporting_failures_all

__all__ = ["PROMPT_FILE", "DeclarativeAgentAdapter", "ResolveTools"]

PROMPT_FILE = "prompt.jinja2"
ResolveTools = Callable[[list[str]], list[Tool]]


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
            raise TokenBudgetExceededError(self.limit, self.used)


class DeclarativeAgentAdapter:
    """``Extension`` + ``AgentProvider`` for a manifest with an ``agent:`` section."""

    def __init__(
        self,
        manifest: Manifest,
        ext_dir: Path,
        model_router: ModelRouter,
        resolve_tools: ResolveTools,
        interceptor: ToolWrapper | None = None,
    ) -> None:
        if manifest.agent is None:
            raise ValueError(f"{ext_dir / MANIFEST_FILE}: agent: section is missing")
        self._manifest = manifest
        self._section: AgentSection = manifest.agent
        self._ext_dir = ext_dir
        self._router = model_router
        self._resolve_tools = resolve_tools
        self._interceptor = interceptor
        self._instructions: str | None = None
        self._tools: list[Tool] | None = None
        self._log = logging.getLogger(f"hearth.ext.{manifest.id}")

    # ------------------------------------------------------------- lifecycle

    async def initialize(self, context: ExtensionContext) -> None:
        """Render the prompt now, so a broken ``prompt.jinja2`` fails at load, naming the file."""
        self._log = context.logger
        _ = self.resolved_instructions

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def destroy(self) -> None:
        return None

    def health_check(self) -> bool:
        return True

    # ---------------------------------------------- what ExtensionContext shows

    @property
    def agent_id(self) -> str:
        return self._manifest.resolved_agent_id

    @property
    def agent_model(self) -> str | None:
        """``agent.model`` from the manifest (``None``: ``models.agents`` or the default)."""
        return self._section.model

    @property
    def model_router(self) -> ModelRouter:
        return self._router

    @property
    def resolved_instructions(self) -> str:
        if self._instructions is None:
            self._instructions = self._build_instructions()
        return self._instructions

    @property
    def resolved_tools(self) -> list[Tool]:
        """Tools of ``uses_tools``, resolved on first use (providers load before us);
        their failures reach the agent's model as a short message, and with an
        interceptor their calls run the tool hooks."""
        if self._tools is None:
            tools = reporting_failures_all(self._resolve_tools(list(self._section.uses_tools)))
            wrapper = self._interceptor
            self._tools = tools if wrapper is None else [wrapper.wrap(t) for t in tools]
        return list(self._tools)

    # --------------------------------------------------------- AgentProvider

    def get_agent_descriptor(self) -> AgentDescriptor:
        return AgentDescriptor(
            name=self.agent_id,
            description=self._manifest.description.strip() or self._manifest.name,
            integration_mode=self._section.integration_mode,
        )

    async def invoke(
        self, task: str, context: AgentInvocationContext | None = None
    ) -> AgentResponse:
        limits = self._section.limits
        budget = _TokenBudget(limits.max_tokens_per_invocation)
        deadline = asyncio.timeout(limits.time_budget_ms / 1000)
        try:
            agent = self._build_agent()
            async with deadline:
                result = await Runner.run(
                    agent,
                    _input_for(task, context),
                    context=context.turn if context else None,
                    max_turns=limits.max_turns,
                    hooks=budget,
                )
        except ModelNotConfiguredError as exc:
            return self._error(exc.reason, exc.reason, budget)
        except MaxTurnsExceeded:
            return self._error(
                f"{self.agent_id} stopped: it needed more than {limits.max_turns} turns.",
                f"max_turns={limits.max_turns} exceeded",
                budget,
            )
        except TokenBudgetExceededError as exc:
            return self._error(
                f"{self.agent_id} stopped: it used more than {exc.limit} tokens.", str(exc), budget
            )
        except TimeoutError:
            if not deadline.expired():
                return self._failed("timed out", budget)
            return self._error(
                f"{self.agent_id} stopped: it ran out of time ({limits.time_budget_ms} ms).",
                f"time_budget_ms={limits.time_budget_ms} exceeded",
                budget,
            )
        except Exception as exc:
            self._log.exception("agent %s failed", self.agent_id)
            return self._failed(_one_line(exc), budget)
        return AgentResponse(
            status="success", content=str(result.final_output or ""), tokens_used=budget.used
        )

    # -------------------------------------------------------------- helpers

    def _build_agent(self) -> Agent[Any]:
        model = self._router.get_model(self.agent_id, self._section.model)
        return HookedAgent(
            name=self.agent_id,
            instructions=self.resolved_instructions,
            model=model,
            tools=self.resolved_tools,
            tool_wrapper=self._interceptor,
        )

    def _build_instructions(self) -> str:
        parts: list[str] = []
        prompt_path = self._ext_dir / PROMPT_FILE
        if prompt_path.is_file():
            variables = {**self._section.parameters, "parameters": self._section.parameters}
            parts.append(PromptTemplate(prompt_path).render(**variables))
        if self._section.instructions.strip():
            parts.append(self._section.instructions.strip())
        return "\n\n".join(p for p in parts if p)

    def _error(self, content: str, reason: str, budget: _TokenBudget) -> AgentResponse:
        self._log.warning("agent %s: %s", self.agent_id, reason)
        return AgentResponse(status="error", content=content, error=reason, tokens_used=budget.used)

    def _failed(self, reason: str, budget: _TokenBudget) -> AgentResponse:
        return self._error(f"{self.agent_id} failed: {reason}", reason, budget)


def _input_for(task: str, context: AgentInvocationContext | None) -> str:
    if context is None or not context.conversation_summary:
        return task
    return f"{task}\n\nConversation so far:\n{context.conversation_summary}"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"
