"""The kernel built in phases: storage → bus → extensions → shaping → turns (ADR 0052).

Each phase is a function that takes what the earlier phases built and returns
its own collaborators in a frozen record; every collaborator gets what it
needs through its constructor. Where two parts need each other, the cycle is
broken at a named place instead of by a lambda that reads an attribute not
assigned yet: the loader builds a declarative agent through the services it
is handed at load time (``declarative_agent``; a reload builds through the
same services, ``Loader.services``), the consent gate is built before the tool
hooks it admits calls for and is given their ``before_tool_call`` chain where it
guards a tool (ADR 0063; the tool call's layers are one list, ``TOOL_LAYERS``,
ADR 0079), the wiring is told whom to tell of a change when it
is attached, the router's channel table is built first (``Bus.channels``) and
filled by the wiring. The replay recorder and
the metrics come from outside (the kernel's runner builds them) and are
handed in as observers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents.models.interface import Model

from core.agents.mcp_servers import McpServers
from core.agents.model_router import ModelRouter
from core.agents.observer import TurnObserver
from core.agents.orchestrator import ORCHESTRATOR_ID, Orchestrator
from core.agents.tool_view import ToolView
from core.config import Settings
from core.events import EventBus
from core.extensions.access.grant_store import GrantStore
from core.extensions.context.agent_gateway import AgentGateway
from core.extensions.context.services import KernelServices
from core.extensions.isolation.kernel.factory import isolated_factory
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.loader import Loader
from core.extensions.loading.manifest import Manifest
from core.extensions.loading.names import NamePolicy
from core.extensions.loading.records import ExtensionRecord
from core.extensions.loading.supervision import ExtensionSupervisor
from core.kernel.agents import KernelAgents
from core.kernel.commands.table import CommandRegistry
from core.kernel.consent.assembly import KernelConsent, declared_tools
from core.kernel.consent.flow import ApprovalFlow
from core.kernel.consent.gate import FullAutoGate
from core.kernel.conversations.people import Household
from core.kernel.conversations.sessions import Conversations
from core.kernel.files import (
    FILES_DIR,
    FileStore,
    Offering,
    PersonFiles,
    ProviderTranscriber,
    TurnFiles,
)
from core.kernel.hooks import FrameRecorder
from core.kernel.hooks.observer import PipelineObserver
from core.kernel.hooks.tool_calls import ToolTap
from core.kernel.reload.registrations import before_extension_code
from core.kernel.scale.placement import placement_of
from core.kernel.scale.seam import LocalScale, Scale
from core.kernel.shaping.assembly import TurnShaping
from core.kernel.shaping.context_chain import ContextChain
from core.kernel.shaping.tool_pipeline import ToolFeatures, ToolParts, ToolPipeline
from core.kernel.shaping.tool_stacking import ToolStacking
from core.kernel.skills import KernelSkills
from core.kernel.spending import NO_SPENDING, TurnSpending
from core.kernel.turns.held import HeldNotices
from core.kernel.turns.notices import Notices
from core.kernel.turns.outbox import ReplyOutbox
from core.kernel.turns.router import MessageRouter
from core.kernel.turns.tool_hints import ToolHints
from core.kernel.turns.turn import TurnRunner
from core.kernel.wiring import LiveOrchestrator, Wiring
from core.runtime import (
    CODE_SNAPSHOTS_DIR,
    SCHEDULES_FILE,
    SESSIONS_FILE,
    STATE_FILE,
    HearthError,
)
from core.scheduling import ManifestScheduler
from core.state import StateStore
from core.tools import build_core_tools

__all__ = [
    "Bus",
    "Extensions",
    "KernelAssemblyError",
    "Shaping",
    "Storage",
    "Turns",
    "build_bus",
    "build_extensions",
    "build_shaping",
    "build_storage",
    "build_turns",
    "declarative_agent",
    "scale_of",
]


class KernelAssemblyError(HearthError):
    """A collaborator was handed something the kernel's phases do not build."""


# ------------------------------------------------------------ storage


@dataclass(frozen=True, slots=True)
class Storage:
    """The conversations (sessions.db) and the extensions' state (state.db)."""

    conversations: Conversations
    state: StateStore


def build_storage(
    settings: Settings, size_observer: Callable[[str, int], None] | None = None
) -> Storage:
    """The stores; ``size_observer`` hears each extension's state size (metrics).
    A session that ends clears its session-scoped state."""
    data_dir = settings.data_dir
    state = StateStore.of(settings, data_dir / STATE_FILE, size_observer)
    conversations = Conversations.of(
        settings, data_dir / SESSIONS_FILE, session_ended=[state.clear_session]
    )
    return Storage(conversations, state)


# ------------------------------------------------------------ bus


@dataclass(frozen=True, slots=True)
class Bus:
    """The event bus, this process's share of the work, and the channel table."""

    bus: EventBus
    scale: Scale
    channels: dict[str, Any]  # channel id -> the live channel (filled by the wiring)


def build_bus(settings: Settings, journal: Path, storage: Storage) -> Bus:
    """The journal's bus and the ``Scale`` seam (ADR 0036, 0052)."""
    bus = EventBus.from_settings(journal, settings.events, settings.storage)
    return Bus(bus, scale_of(settings, bus, storage.conversations.lock), {})


def scale_of(settings: Settings, bus: EventBus, local_lock: Callable[[str], asyncio.Lock]) -> Scale:
    """``ScaleOut`` when kernel processes may share PostgreSQL, else the null object."""
    if placement_of(settings.storage, settings.kernel, settings.data_dir).shared:
        from core.kernel.scale.scale_out import ScaleOut  # asyncpg: only where it is used

        return ScaleOut(settings, bus, local_lock)
    return LocalScale(local_lock)


# ------------------------------------------------------------ extensions


@dataclass(frozen=True, slots=True)
class Extensions:
    """The loader and what reads its records: names, commands, tools, wiring."""

    loader: Loader
    names: NamePolicy
    commands: CommandRegistry
    tool_stacking: ToolStacking
    wiring: Wiring
    scheduler: ManifestScheduler
    supervision: ExtensionSupervisor
    core_tools: Callable[[], list[Any]]
    skills: KernelSkills
    # the kernel's tools built after this phase (workflows, ADR 0091): filled in by the kernel
    later_tools: list[Any]


def declarative_agent(manifest: Manifest, ext_dir: Path, services: KernelServices) -> Any:
    """The loader's agent factory: an ``agent:`` manifest's agent, built by the kernel's
    agent gateway the services carry (its models, tools and tool hooks)."""
    agents: AgentGateway = services.agents
    if not isinstance(agents, KernelAgents):
        raise KernelAssemblyError(
            f"{manifest.id}: an agent extension needs the kernel's agents in its services"
        )
    return agents.declared_agent(manifest, ext_dir, [])


def build_extensions(
    settings: Settings,
    bus: Bus,
    *,
    secrets: Mapping[str, str],
    disabled: Mapping[str, str] | None,
    request_restart: Callable[[str], None],
    wiring_changed: Callable[[], None],
) -> Extensions:
    """The loader (isolated and agent extensions through factories), the name policy,
    the command registry, tool stacking, the wiring, the schedules and supervision."""
    records: dict[str, ExtensionRecord] = {}
    loader = Loader(
        settings.extensions_dir,
        lifecycle_timeout_s=settings.loader.lifecycle_timeout_s,
        default_isolation=settings.isolation.default,
        agent_factory=declarative_agent,
        isolated_factory=isolated_factory(settings.isolation, settings.loader, records),
        disabled=disabled,
        grants=GrantStore(settings.data_dir),
        secrets=secrets,
        records=records,
        on_discovered=lambda manifests: before_extension_code(manifests, settings, secrets),
        code_snapshots=settings.data_dir / CODE_SNAPSHOTS_DIR,
    )

    def core_tools() -> list[Any]:
        """The kernel's own tools (clock, extensions list, restart; skills when there are)."""
        tools = build_core_tools(
            timezone=settings.timezone,
            list_extensions=loader.report,
            request_restart=request_restart,
        )
        return [*tools, *skills.tools(), *later_tools]

    later_tools: list[Any] = []

    names = NamePolicy(loader.rank_of, loader.replaces_of)
    commands = CommandRegistry(names)
    stacking = ToolStacking(
        names,
        priority_of=loader.priority_of,
        overrides=settings.tools.overrides,
        core_tools=core_tools,
    )
    scheduler = ManifestScheduler(
        bus.bus,
        settings.data_dir / SCHEDULES_FILE,
        lookup=loader.instance,
        storage=settings.storage,
        leadership=bus.scale.leadership,
    )
    supervision = ExtensionSupervisor(
        loader,
        health_interval_s=settings.loader.health_check_interval_s,
        backoff_max_s=settings.loader.restart_backoff_max_s,
        isolated_backoff_max_s=settings.isolation.restart_backoff_max_s,
    )
    wiring = Wiring(loader, bus.bus, commands)
    skills = KernelSkills(  # Agent Skills (ADR 0058)
        settings,
        lambda: [(r.ext_id, r.code_dir or r.ext_dir) for r in wiring.wired()],
        on_change=wiring_changed,
    )
    return Extensions(
        loader,
        names,
        commands,
        stacking,
        wiring,
        scheduler,
        supervision,
        core_tools,
        skills,
        later_tools,
    )


# ------------------------------------------------------------ shaping


@dataclass(frozen=True, slots=True)
class Shaping:
    """Models, MCP servers, the turn's shaping, context, consent and the orchestrator."""

    model_router: ModelRouter
    mcp: McpServers
    shaping: TurnShaping
    context: ContextChain
    consent: KernelConsent
    orchestrator: LiveOrchestrator
    agent_tools: ToolPipeline  # a declarative agent's tool layers (ADR 0079)
    tool_features: Callable[[], ToolFeatures]  # which tool layers are on now


def build_shaping(
    settings: Settings,
    storage: Storage,
    bus: Bus,
    ext: Extensions,
    *,
    household: Household,
    model_overrides: Mapping[str, Model] | None,
    recorder: ToolTap,
    model_wrapper: Callable[[Model], Model],
    tool_runs: ToolTap,
    observer: PipelineObserver,
    agent_hooks: Any,
) -> Shaping:
    """Everything a turn is shaped by; ``recorder`` (through ``model_wrapper``) sees
    every tool (model) call while ``replay.record`` is on (off, it is in no call's
    way), ``tool_runs`` every tool run (ADR 0061), ``observer`` every hook and tool
    call (metrics), ``agent_hooks`` the orchestrator's runs (token counts). A tool
    call crosses the rows of ``TOOL_LAYERS`` that are on (ADR 0079)."""
    features = ToolFeatures.of(settings, skills=False)  # skills: per orchestrator build
    model_router = ModelRouter(
        settings.models,
        overrides=model_overrides,
        model_wrapper=model_wrapper if features.replay else None,
        tool_view=ToolView(settings.tools.resident),  # for schemas on demand (ADR 0097)
    )
    mcp = McpServers(settings.mcp)
    wired = ext.wiring.wired
    consent = KernelConsent(  # ADR 0021: every tool call passes its gate
        settings,
        settings.data_dir / SESSIONS_FILE,
        bus.bus,
        declared=lambda: declared_tools(wired(), ext.core_tools()),
        channel_for=bus.channels.get,
        household=household,
    )
    shaping = TurnShaping(
        settings,
        wired=wired,
        frames=bus.bus,
        state=storage.state,
        model_router=model_router,
        observer=observer,
        admission=consent.gate if features.consent else FullAutoGate(consent.gate),
        resolve_person=household.resolve,  # post-processor activations follow the person
        count_usage=agent_hooks.add,  # what post-processors spend counts (issue 46)
        names=ext.names,  # who keeps a #name two extensions offer
    )
    context = ContextChain(
        lambda: [(r.ext_id, r.instance) for r in wired(Capability.CONTEXT)],
        provider_timeout_s=settings.turns.context_timeout_s,
    )

    def tool_features() -> ToolFeatures:
        """The features as they are now: a skill may be added while the kernel runs
        (the orchestrator is rebuilt then)."""
        return replace(features, skills=bool(ext.skills.catalog().skills))

    parts = ToolParts(ext.skills.active, consent.gate, shaping.tools, recorder, tool_runs)

    def orchestrator() -> Orchestrator:
        """Core tools first, then wired extensions' tools and agents, one active
        provider per name (``ToolStacking``, ADR 0027); rebuilt by ``LiveOrchestrator``
        on the first turn after the wiring changed."""
        toolset = ext.tool_stacking.toolset(wired())
        on = tool_features()
        pipeline = ToolPipeline.build(parts, on)
        if on.consent:  # the gate's table of tools, built with the tools (not at a call)
            consent.catalog.prime()
        return Orchestrator(
            model_router=model_router,
            timezone=settings.timezone,
            tools=toolset.tools,
            agent_tools=toolset.agent_tools,
            capabilities=toolset.capabilities,
            mcp_servers=mcp.active,
            tool_guidance=shaping.tool_guidance(c.name for c in toolset.capabilities),
            skill_catalog=ext.skills.prompt_text(),
            interceptor=pipeline,
            agent_hooks=agent_hooks,
            guardrails=shaping.guardrails,
        )

    live = LiveOrchestrator(orchestrator)
    agents_pipeline = ToolPipeline.build(parts, features, agents=True)
    return Shaping(
        model_router, mcp, shaping, context, consent, live, agents_pipeline, tool_features
    )


# ------------------------------------------------------------ turns


@dataclass(frozen=True, slots=True)
class Turns:
    """The turn runner, the outbox, the notices, the consent stage, the router and
    the agent gateway extensions reach them through."""

    runner: TurnRunner
    outbox: ReplyOutbox
    notices: Notices
    approvals: ApprovalFlow
    router: MessageRouter
    agents: KernelAgents
    files: PersonFiles  # channels' way to their people's files (ADR 0096)


def build_turns(
    settings: Settings,
    storage: Storage,
    bus: Bus,
    ext: Extensions,
    shaped: Shaping,
    *,
    household: Household,
    observer: TurnObserver,
    user_facing_errors: tuple[type[Exception], ...],
    spending: TurnSpending = NO_SPENDING,
) -> Turns:
    """The turn pipeline: runner (observed), outbox and notices (through the ``Scale``
    seam), the consent stage, and the router that calls them."""
    limits, shaping = settings.turns, shaped.shaping
    runner = TurnRunner(
        orchestrator=shaped.orchestrator,
        context=shaped.context,
        hooks=shaping.hooks,
        additions=shaping.additions,
        compactor=shaping.compactor,
        max_turns=10,
        timeout_s=limits.timeout_s,
        history_max_items=limits.history_max_items,
        user_facing_errors=user_facing_errors,
        post=shaping.post,
        observer=observer,
        ledger_records=spending.records,
        keep_notes=shaped.model_router.keeps_notes(ORCHESTRATOR_ID),  # ADR 0097
    )
    scale, channels = bus.scale, bus.channels
    outbox = ReplyOutbox(bus.bus, channels.get, send_timeout_s=limits.send_timeout_s, scale=scale)
    held = HeldNotices.at(
        settings.data_dir / STATE_FILE, settings.storage, synchronous=settings.events.synchronous
    )
    notices = Notices(
        bus.bus,
        channels,
        settings.channels.default,
        scale,
        household,
        held,
        send_timeout_s=limits.send_timeout_s,
    )
    consent = shaped.consent
    files = FileStore(settings.data_dir / FILES_DIR, settings.files)
    turn_files = TurnFiles(files)
    approvals = ApprovalFlow(
        consent.desk,
        consent.gate,
        consent.ui,
        runner,
        storage.conversations,
        outbox,
        household,
        turn_lock=scale.turn_lock,
        files=turn_files,
    )
    heard = settings.files.transcription_model
    transcribe = ProviderTranscriber(shaped.model_router.client_of, heard) if heard else None
    router = MessageRouter(
        bus=bus.bus,
        conversations=storage.conversations,
        commands=ext.commands,
        context=shaped.context,
        runner=runner,
        outbox=outbox,
        notices=notices,
        channels=channels,
        scale=scale,
        consent=approvals,
        household=household,
        turns=limits,
        spending=spending,
        files=turn_files,
        offering=Offering(files, settings.files, transcribe),
        hints=ToolHints(
            lambda: [(r.ext_id, r.instance) for r in ext.wiring.wired(Capability.TOOL_RENDERER)],
            frames=FrameRecorder(bus.bus),
        ),
    )
    loader = ext.loader

    def extension_tools(ext_id: str) -> list[Any]:
        record = loader.records.get(ext_id)
        return list(record.tools) if record is not None and record.has(Capability.TOOL) else []

    agents = KernelAgents(
        router=router,
        context=shaped.context,
        model_router=shaped.model_router,
        core_tools=ext.core_tools,
        extension_tools=extension_tools,
        interceptor=shaped.agent_tools,
    )
    return Turns(runner, outbox, notices, approvals, router, agents, PersonFiles(files, household))
