"""What shapes a turn, assembled once per kernel: hooks, tool interception,
prompt additions, tool guidance, history compaction and answer post-processors
(ADR 0019, 0020, 0023). The layers around a tool call are listed in
``tool_pipeline.py`` (ADR 0079).

Everything here is built from the wired extensions (through ``wired``) and the
``hooks.*`` / ``turns.*`` / ``postprocess.*`` settings, and rebuilt lazily when the wiring
changes (``invalidate``), like the orchestrator.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence

from core.agents.model_router import ModelRouter
from core.config import Settings
from core.extensions.loading.names import NamePolicy
from core.extensions.loading.records import ExtensionRecord
from core.kernel.compaction import HistoryCompactor
from core.kernel.hooks import (
    Admission,
    FrameRecorder,
    FrameSink,
    HookCaller,
    HookRegistry,
    PromptAdditions,
    StateReader,
    ToolInterceptor,
    TurnGuardrails,
    TurnHooks,
    command_hook_entries,
    tool_guidance,
)
from core.kernel.hooks.observer import NO_OBSERVER, PipelineObserver
from core.kernel.postprocess import Count, PostProcessing, Resolve, orchestrator_model
from core.runtime import SESSIONS_FILE, secret_file_names

__all__ = ["TurnShaping"]

log = logging.getLogger("core.kernel.shaping.assembly")


class TurnShaping:
    """The hook registry and everything that calls it, sharing one caller and frames."""

    def __init__(
        self,
        settings: Settings,
        *,
        wired: Callable[[], Sequence[ExtensionRecord]],
        frames: FrameSink,
        state: StateReader,
        model_router: ModelRouter,
        observer: PipelineObserver = NO_OBSERVER,
        admission: Admission | None = None,
        resolve_person: Resolve | None = None,
        count_usage: Count | None = None,
        names: NamePolicy | None = None,
    ) -> None:
        self._wired = wired
        command_hooks = command_hook_entries(
            settings.hooks,
            cwd=settings.settings_file.parent if settings.settings_file else None,
            withheld=withheld_from_commands(settings),
        )
        self.registry = HookRegistry(wired, extra=lambda: command_hooks)
        self.hooks = TurnHooks(
            self.registry,
            HookCaller(
                settings.hooks.timeout_s,
                observer,
                max_result_bytes=settings.events.max_payload_bytes,
            ),
            FrameRecorder(frames),
            authoritative_routing=settings.hooks.authoritative_routing,
        )
        self.additions = PromptAdditions(wired, state=state)
        # every tool call of every agent the kernel runs goes through the tool hooks,
        # after ``admission`` (the consent gate, ADR 0021): the ``hooks`` layer of the
        # tool pipeline (``tool_pipeline.py``, ADR 0079)
        self.tools = ToolInterceptor(
            self.registry, self.hooks.caller, self.hooks.frames, admission=admission
        )
        # the extensions' guardrails, as the orchestrator's SDK guardrails (ADR 0021)
        self.guardrails = TurnGuardrails(self.registry, self.hooks.caller, self.hooks.frames)
        self.compactor = HistoryCompactor(
            settings.turns, model_router, self.registry, self.hooks.caller, self.hooks.frames
        )
        # `#json` after a message: kept with the turn in sessions.db (ADR 0023)
        self.post = PostProcessing.build(
            settings.data_dir / SESSIONS_FILE,
            frames,
            wired,
            settings=settings.postprocess,
            model_of=orchestrator_model(model_router),
            storage=settings.storage,
            resolve=resolve_person,
            count=count_usage,
            names=names,
        )

    def invalidate(self) -> None:
        """The wiring changed: hook order and additions are rebuilt on next use."""
        self.registry.invalidate()
        self.additions.invalidate()

    def tool_guidance(self, tool_names: Iterable[str]) -> str:
        """The wired extensions' ``tool_config`` as guidance text; a name no tool
        has is logged (MCP tools, listed at run time, are not checked)."""
        guidance, unknown = tool_guidance(
            [
                (r.ext_id, r.manifest.tool_config)
                for r in self._wired()
                if r.manifest is not None and not r.manifest.tool_config.empty
            ],
            tool_names,
        )
        for warning in unknown:
            log.warning("%s (tools are checked when the orchestrator is built)", warning)
        return guidance


def withheld_from_commands(settings: Settings) -> set[str]:
    """Environment names a hook command never gets: the ``.env`` file's, the model API
    keys' and any holding the storage DSN, password or not (values of declared
    secrets are withheld as redacted)."""
    names = set(secret_file_names())
    names.update(p.api_key_env for p in settings.models.providers.values() if p.api_key_env)
    dsn = settings.storage.postgres_dsn
    if dsn:
        names.update(name for name, value in os.environ.items() if dsn in value)
    return names
