"""Bootstrap and shutdown of one kernel process (seed 002 "Bootstrap Flow").

``Kernel.start()`` loads and initializes extensions, attaches the wiring (which connects
each extension's channels, commands, tools, context and subscriptions when it is live
and takes them away when it is not), starts the extensions, then the bus.
``Kernel.run()`` keeps the long-lived tasks (extension supervision, the bus) in one
TaskGroup: if one of them dies the kernel stops with that error — loudly, for the
supervisor to restart it. ``Kernel.stop()`` runs every step even when one raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from agents.models.interface import Model

from core.agents.declarative import DeclarativeAgentAdapter
from core.agents.errors import ModelNotConfiguredError
from core.agents.mcp_servers import McpServers
from core.agents.model_router import ModelRouter, configure_tracing
from core.agents.orchestrator import Orchestrator
from core.config import Settings
from core.events import EventBus
from core.extensions.capabilities import Capability
from core.extensions.grant_store import GrantStore
from core.extensions.isolation.factory import isolated_factory
from core.extensions.loader import Loader
from core.extensions.manifest import Manifest
from core.extensions.names import NamePolicy
from core.extensions.services import KernelServices
from core.extensions.shared_services import ServiceRegistry
from core.extensions.supervision import ExtensionSupervisor
from core.kernel.agents import KernelAgents
from core.kernel.builtin_commands import builtin_commands
from core.kernel.commands import CommandRegistry
from core.kernel.consent.assembly import KernelConsent, declared_tools
from core.kernel.context_chain import ContextChain
from core.kernel.conversations import SESSIONS_FILE, Conversations
from core.kernel.mcp_desk import MCP_CHANNEL, McpDesk
from core.kernel.people import Household
from core.kernel.registrations import before_extension_code, reconcile_registrations
from core.kernel.reload import ExtensionReloader
from core.kernel.reload_control import ReloadControl
from core.kernel.router import MessageRouter
from core.kernel.scale_out import ScaleOut
from core.kernel.setup_command import extension_commands
from core.kernel.shaping import TurnShaping
from core.kernel.skills import KernelSkills
from core.kernel.status import KernelOperator
from core.kernel.status_source import KernelStatusSource
from core.kernel.tool_stacking import StackedTools, ToolStacking
from core.kernel.wiring import LiveOrchestrator, Wiring
from core.metrics import KernelMetrics, MetricsExport, kernel_sources
from core.runtime import (
    create_private,
    load_secrets,
    make_private,
    refuse_symlinks,
    write_restart_request,
)
from core.scheduling import ManifestScheduler, manifest_schedules
from core.state import StateStore
from core.tools import build_core_tools

log = logging.getLogger("core.kernel.runner")

JOURNAL_FILE = "events.db"
SCHEDULES_FILE = "schedules.db"
STATE_FILE = "state.db"


class Kernel:
    """One running Hearth kernel."""

    def __init__(
        self,
        settings: Settings,
        *,
        model_overrides: Mapping[str, Model] | None = None,
        disabled_extensions: Mapping[str, str] | None = None,
        journal_path: Path | None = None,
    ) -> None:
        self.settings = settings
        self.started_at = time.monotonic()
        self.data_dir = settings.data_dir
        kernel_files = (JOURNAL_FILE, SESSIONS_FILE, SCHEDULES_FILE, STATE_FILE)
        refuse_symlinks(
            *(
                self.data_dir / f"{name}{suffix}"
                for name in kernel_files
                for suffix in ("", "-wal", "-shm", "-journal")
            )
        )
        make_private(self.data_dir)  # 0700, databases 0600 (ADR 0048)
        if settings.storage.backend == "sqlite":
            for name in kernel_files[1:] if journal_path else kernel_files:
                create_private(self.data_dir / name)
        self.secrets = load_secrets()
        self.restart_requested: str | None = None
        self._restart_written: asyncio.Future[None] | None = None
        self._stop_requested = asyncio.Event()
        self.bus = EventBus.from_settings(
            journal_path or self.data_dir / JOURNAL_FILE, settings.events, settings.storage
        )
        configure_tracing(settings.models.tracing)
        self.model_router = ModelRouter(settings.models, overrides=model_overrides)
        self.mcp = McpServers(settings.mcp)
        self.loader = Loader(
            settings.extensions_dir,
            lifecycle_timeout_s=settings.loader.lifecycle_timeout_s,
            default_isolation=settings.isolation.default,
            agent_factory=self._make_agent,
            disabled=disabled_extensions,
            grants=GrantStore(self.data_dir),
            secrets=self.secrets,
        )
        self.loader.isolated_factory = isolated_factory(settings, self.loader)
        self.loader.on_discovered = lambda manifests: before_extension_code(
            manifests, settings, self.secrets
        )
        self.scale = ScaleOut(settings, lambda key: self.conversations.lock(key))  # ADR 0036
        self.scheduler = ManifestScheduler(
            self.bus,
            self.data_dir / SCHEDULES_FILE,
            lookup=self.loader.instance,
            storage=settings.storage,
            leadership=self.scale.leadership,
        )
        self.names = NamePolicy(self.loader.rank_of, self.loader.replaces_of)
        self.commands = CommandRegistry(self.names)
        self.tool_stacking = ToolStacking(
            self.names,
            priority_of=self.loader.priority_of,
            overrides=settings.tools.overrides,
            core_tools=self.core_tools,
        )
        self.conversations = Conversations.of(settings, self.data_dir / SESSIONS_FILE)
        self.state = StateStore.of(settings, self.data_dir / STATE_FILE)
        self.metrics = KernelMetrics()
        self.metrics.watch(kernel_sources(self.loader, self.state, self.bus))
        self.state.size_observer = self.metrics.state_written
        self.metrics_export = MetricsExport(self.metrics, settings.metrics, self.data_dir)
        self.conversations.session_ended.append(self.state.clear_session)
        self.context = ContextChain(
            self._context_providers, provider_timeout_s=settings.turns.context_timeout_s
        )
        self.orchestrator = LiveOrchestrator(self._build_orchestrator)
        self.skills = KernelSkills(  # Agent Skills (ADR 0058)
            settings,
            lambda: [(r.ext_id, r.ext_dir) for r in self.wiring.wired()],
            on_change=self._wiring_changed,
        )
        self.shaping = TurnShaping(
            settings,
            wired=lambda: self.wiring.wired(),
            frames=self.bus,
            state=self.state,
            model_router=self.model_router,
            observer=self.metrics,
        )
        self.hook_registry, self.hooks = self.shaping.registry, self.shaping.hooks
        self.household = Household.of(settings)  # who each turn is for (SPEC §11)
        self.consent = KernelConsent(  # ADR 0021: every tool call passes its gate
            settings,
            self.data_dir / SESSIONS_FILE,
            self.bus,
            self.shaping,
            declared=lambda: declared_tools(self.wiring.wired(), self.core_tools()),
            channel_for=lambda channel_id: self.router and self.router.channels.get(channel_id),
            household=self.household,
        )
        self.wiring = Wiring(self.loader, self.bus, self.commands, on_change=self._wiring_changed)
        self.status = KernelStatusSource(  # what /status reports
            self.started_at,
            self.model_router,
            self.loader,
            self.wiring.is_wired,
            self.mcp,
            self.bus,
            self.consent.summary,
            self.tool_stacks,
        )
        self.agents = KernelAgents(
            router=lambda: self.router,
            context=self.context,
            model_router=self.model_router,
            core_tools=self.core_tools,
            extension_tools=self._extension_tools,
            interceptor=self.shaping.tools,
        )
        self.router: MessageRouter | None = None
        self.services = KernelServices(
            settings=settings,
            bus=self.bus,
            get_instance=self.loader.instance,
            request_restart=self.request_restart,
            request_shutdown=self.request_shutdown,
            secrets=self.secrets,
            state=self.state,
            agents=self.agents,
            ui=self.consent.ui,
            list_commands=self.commands.names_and_descriptions,
            list_post_processors=self.shaping.post.activated_names,
            is_wired=self.wiring.is_wired,
            operations=KernelOperator(self.status, self.bus.journal),
            shared=ServiceRegistry(shutdown_timeout_s=settings.loader.lifecycle_timeout_s),
            node=self.scale.placement.node,
            leadership=self.scale.leadership,  # ADR 0036
        )
        self.supervision = ExtensionSupervisor(
            self.loader,
            health_interval_s=settings.loader.health_check_interval_s,
            backoff_max_s=settings.loader.restart_backoff_max_s,
            isolated_backoff_max_s=settings.isolation.restart_backoff_max_s,
        )
        self.reloads = ReloadControl(  # ADR 0032: /reload, the command line, dev.watch
            ExtensionReloader(
                self.loader,
                self.services,
                self.supervision,
                self.wiring,
                self.bus,
                drain_s=settings.dev.reload_drain_s,
            ),
            self.bus,
            self.loader,
            settings.dev,
        )
        self.services.reload_extension = self.reloads.attempt
        self.ready = asyncio.Event()

    # ------------------------------------------------------------ bootstrap

    async def load(self) -> None:
        """Discover, load and initialize extensions (no start): ``main.py extensions``."""
        await self.loader.load_all(self.services)

    async def start(self) -> None:
        """Everything up to "ready": extensions loaded, started (and so wired), bus running.

        Extensions start before the bus dispatches, so a message left over from
        the last run finds its channel wired; what they publish meanwhile is
        journaled and delivered once the bus runs.
        """
        await asyncio.gather(self.conversations.open(), self.shaping.post.open())  # sessions.db
        await self.state.open()
        await self.load()
        await self.scale.open(self.loader.records.values())  # this role's extensions only
        await reconcile_registrations(self.loader, self.state, self.bus, self.scale.roster)
        await self.mcp.connect()
        self.router = MessageRouter(
            bus=self.bus,
            conversations=self.conversations,
            commands=self.commands,
            context=self.context,
            orchestrator=self.orchestrator,
            hooks=self.hooks,
            additions=self.shaping.additions,
            compactor=self.shaping.compactor,
            default_channel=self.settings.channels.default,
            user_facing_errors=(ModelNotConfiguredError,),
            turns=self.settings.turns,
            post=self.shaping.post,
            consent=(self.consent.desk, self.consent.gate, self.consent.ui),
            placement=self.scale.placement,
            turn_lock=self.scale.turn_lock,
            household=self.household,
        )
        self.router.outbox.replies_sent = self.scale.replies_sent  # order across nodes
        self.mcp_desk = McpDesk(  # `main.py mcp` is a front of this kernel (ADR 0059)
            self.bus,
            self.household,
            lambda: self.orchestrator.tools,
            lambda tool: self.consent.catalog.info(tool).side_effects,
            self.settings.people,
        )
        self.router.register_channel(MCP_CHANNEL, self.mcp_desk.channel)
        self.services.mcp = self.mcp_desk  # http_api's /mcp (ADR 0062)
        builtins = self.shaping.post.commands() + builtin_commands(
            help_text=self.commands.help_text,
            conversations=self.conversations,
            status=self.status,
            on_session_end=self.hooks.session_ended,
        )
        consent = self.consent.commands(lambda: self.orchestrator.tools, lambda: self.mcp.active)
        managing = extension_commands(self.loader, self.consent.ui)  # /grant, /setup
        kernel_commands = [*builtins, *managing, self.reloads.command(), self.skills.command()]
        for command in [*kernel_commands, *consent]:
            self.commands.add("kernel", command)
        self.wiring.attach(self.router)
        self.router.subscribe()
        if self.scale.placement.runs_workers:
            self.scheduler.subscribe()
        self.reloads.subscribe()
        if self.scale.placement.runs_workers:
            self.mcp_desk.subscribe()
        await self.loader.start_all()
        await self._forget_released_subscriptions()
        await self.consent.start()  # questions left open by the last run: asked again
        await self.bus.start()
        await self.metrics_export.start()
        await self.scheduler.start(
            manifest_schedules(self.wiring.wired(Capability.SCHEDULER), self.settings.timezone)
        )
        self.ready.set()
        log.info(
            "kernel ready: %d extensions active, model %s",
            len(self.wiring.wired()),
            self.model_router.describe("orchestrator"),
        )

    async def _forget_released_subscriptions(self) -> None:
        """Journal rows of subscriptions a started extension no longer makes are dropped.
        Not when nodes share the journal: another may run a version that makes them (a
        rolling upgrade); one no node makes is forgotten by the retention purge."""
        if self.scale.placement.shared:
            return
        for record in self.loader.active():
            if forgotten := await self.bus.forget_subscribers(f"{record.ext_id}/"):
                log.info("extension %s: forgot %d old subscriptions", record.ext_id, len(forgotten))

    def _wiring_changed(self) -> None:
        """What was built from the wired extensions is rebuilt on next use."""
        self.orchestrator.invalidate()
        self.skills.invalidate()
        self.shaping.invalidate()
        self.consent.catalog.invalidate()

    def _build_orchestrator(self) -> Orchestrator:
        """Core tools first, then wired extensions' tools and agents, one active
        provider per name (``ToolStacking``, ADR 0027).

        Called by ``LiveOrchestrator`` on the first turn after the wiring changed.
        """
        toolset = self.tool_stacking.toolset(self.wiring.wired())
        return Orchestrator(
            model_router=self.model_router,
            timezone=self.settings.timezone,
            tools=toolset.tools,
            agent_tools=toolset.agent_tools,
            capabilities=toolset.capabilities,
            mcp_servers=self.mcp.active,
            tool_guidance=self.shaping.tool_guidance(c.name for c in toolset.capabilities),
            skill_catalog=self.skills.prompt_text(),
            interceptor=self.skills.wrapper(self.consent.wrapper),
            agent_hooks=self.metrics.token_hooks,
            guardrails=self.shaping.guardrails,
        )

    async def run(self) -> None:
        """Start, serve until a stop is requested or a kernel task dies, stop.

        A dead task (the bus's writer, the supervision loop) propagates out of
        here after ``stop()``: the process exits non-zero and the supervisor
        restarts it, instead of serving on half-broken.
        """
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(self.stop)
            await self.start()
            async with asyncio.TaskGroup() as group:
                tasks = [
                    group.create_task(self.supervision.run(), name="extension-supervision"),
                    group.create_task(self.bus.watch(), name="event-bus-watch"),
                    group.create_task(self.metrics_export.run(), name="metrics-snapshots"),
                    group.create_task(self.reloads.watch(), name="dev-watch"),
                    group.create_task(self.scale.run(), name="schedule-lease"),
                ]
                await self._stop_requested.wait()
                for task in tasks:
                    task.cancel()

    async def stop(self) -> None:
        """Stop the schedule timer, drain the bus, then stop and destroy extensions.

        Every step runs even when an earlier one raises; each failure is logged
        with its step and the last one is raised at the end.
        """
        steps: list[tuple[str, Callable[[], Awaitable[None] | None]]] = [
            ("restart request", self._restart_request_written),
            ("scheduler", self.scheduler.stop),
            ("approval timers", self.consent.stop),
            ("reloads under way", self.reloads.aclose),
            ("event bus", self.bus.stop),
            ("MCP servers", self.mcp.cleanup),
            ("extensions", self.loader.shutdown),
            ("shared services", self.services.shared.aclose),
            ("wiring", self.wiring.detach),
            ("conversations", self.conversations.aclose),
            ("post-processing records", self.shaping.post.aclose),
            ("approvals", self.consent.aclose),
            ("extension state", self.state.aclose),
            ("schedule lease", self.scale.aclose),
            ("model router", self.model_router.aclose),
            ("metrics", self.metrics_export.aclose),  # the last snapshot, after everything
        ]
        async with contextlib.AsyncExitStack() as stack:
            for name, step in reversed(steps):
                stack.push_async_callback(_logged_step, name, step)
        log.info("kernel stopped")

    # ------------------------------------------------------------ control

    def request_shutdown(self) -> None:
        self._stop_requested.set()

    def request_restart(self, reason: str) -> None:
        log.info("restart requested: %s", reason)
        self.restart_requested = reason
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop running: nothing to block
            write_restart_request(self.data_dir, reason)
        else:  # the fsync runs in a thread; stop() waits for it before the process exits
            self._restart_written = loop.run_in_executor(
                None, write_restart_request, self.data_dir, reason
            )
        self._stop_requested.set()

    async def _restart_request_written(self) -> None:
        """The restart request's fsync (started in a thread) is done before exit."""
        if self._restart_written is not None:
            await self._restart_written

    # ------------------------------------------------------------ helpers

    def core_tools(self) -> list[Any]:
        """The kernel's own tools (clock, extensions list, restart; skills when there are)."""
        tools = build_core_tools(
            timezone=self.settings.timezone,
            list_extensions=self.loader.report,
            request_restart=self.request_restart,
        )
        return [*tools, *self.skills.tools()]

    def tool_stacks(self) -> StackedTools:
        """The wired extensions' tool stacks (what the orchestrator gets), for ``/status``."""
        return self.tool_stacking.stacked(self.wiring.wired())

    def _context_providers(self) -> list[tuple[str, Any]]:
        return [(r.ext_id, r.instance) for r in self.wiring.wired(Capability.CONTEXT)]

    def _extension_tools(self, ext_id: str) -> list[Any]:
        record = self.loader.records.get(ext_id)
        return list(record.tools) if record is not None and record.has(Capability.TOOL) else []

    def _make_agent(self, manifest: Manifest, ext_dir: Path, services: KernelServices) -> Any:
        return DeclarativeAgentAdapter(
            manifest, ext_dir, self.model_router, self.agents.resolve_tools, self.shaping.tools
        )


async def _logged_step(name: str, step: Callable[[], Awaitable[None] | None]) -> None:
    try:
        result = step()
        if result is not None:
            await result
    except Exception:
        log.exception("kernel stop: %s failed; the other steps still run", name)
        raise
