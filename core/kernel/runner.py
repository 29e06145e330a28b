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
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from agents.models.interface import Model

from core.agents.errors import ModelNotConfiguredError
from core.agents.model_router import configure_tracing
from core.agents.observer import TurnObservers
from core.agents.orchestrator import ORCHESTRATOR_ID
from core.agents.tool_view import load_tools_tool
from core.config import Settings
from core.extensions.context.services import KernelServices
from core.extensions.context.shared_services import ServiceRegistry
from core.extensions.contract import TurnContext
from core.extensions.loading.capabilities import Capability
from core.kernel.commands.builtin import builtin_commands
from core.kernel.commands.setup import extension_commands
from core.kernel.commands.status_source import KernelStatusSource
from core.kernel.conversations.people import Household
from core.kernel.mcp_desk import MCP_CHANNEL, McpDesk, mcp_listing
from core.kernel.phases import (
    build_bus,
    build_extensions,
    build_shaping,
    build_storage,
    build_turns,
)
from core.kernel.reload.control import ReloadControl
from core.kernel.reload.registrations import reconcile_registrations
from core.kernel.reload.reloader import ExtensionReloader
from core.kernel.shaping.tool_stacking import StackedTools
from core.kernel.spending import Spending, usage_book_for
from core.kernel.status import KernelOperator
from core.kernel.turns import PrefixWarmer
from core.kernel.workflows import (
    KernelPowers,
    Workflows,
    WorkflowStore,
    workflow_commands,
    workflow_tools,
)
from core.metrics import KernelMetrics, MetricsExport, kernel_sources
from core.replay.recording import ReplayRecorder
from core.runtime import (
    JOURNAL_FILE,
    SCHEDULES_FILE,
    SESSIONS_FILE,
    STATE_FILE,
    create_private,
    load_secrets,
    make_private,
    refuse_symlinks,
    write_restart_request,
)
from core.scheduling import manifest_schedules

__all__ = ["Kernel", "kernel_apart"]

log = logging.getLogger("core.kernel.runner")


class Kernel:
    """One running Hearth kernel, built in phases (``core/kernel/phases.py``, ADR 0052)."""

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
        _private_data_dir(settings, journal_path)
        self.secrets = load_secrets()
        self.restart_requested: str | None = None
        self._restart_written: asyncio.Future[None] | None = None
        self._stop_requested = asyncio.Event()
        self.ready = asyncio.Event()
        configure_tracing(settings.models.tracing)
        self.metrics = KernelMetrics()

        storage = build_storage(settings, self.metrics.state_written)
        self.conversations, self.state = storage.conversations, storage.state

        bus = build_bus(settings, journal_path or self.data_dir / JOURNAL_FILE, storage)
        self.bus, self.scale = bus.bus, bus.scale  # ADR 0036, 0052
        # every turn's model calls and tool runs journaled for `main.py replay` (ADR 0033)
        self.recorder = ReplayRecorder.from_settings(self.bus, settings)

        ext = build_extensions(
            settings,
            bus,
            secrets=self.secrets,
            disabled=disabled_extensions,
            request_restart=self.request_restart,
            wiring_changed=self._wiring_changed,
        )
        self.loader, self.names, self.commands = ext.loader, ext.names, ext.commands
        self.tool_stacking, self.wiring = ext.tool_stacking, ext.wiring
        self.scheduler, self.supervision = ext.scheduler, ext.supervision
        self.core_tools = ext.core_tools  # the kernel's own tools (clock, extensions, restart)
        self.skills = ext.skills
        self.metrics.watch(kernel_sources(self.loader, self.state, self.bus))
        self.metrics_export = MetricsExport(self.metrics, settings.metrics, self.data_dir)

        # who each turn is for (SPEC §11)
        self.household = Household.of(settings.people, settings.extensions)
        # on the ledger's database: the usage rows are written in its transactions
        book = usage_book_for(
            settings, self.data_dir / SESSIONS_FILE, self.conversations.storage.db
        )
        self.spending = Spending(  # usage, cost and budget of turns (ADR 0061)
            settings.models, book, timezone=settings.timezone
        )
        shaped = build_shaping(
            settings,
            storage,
            bus,
            ext,
            household=self.household,
            model_overrides=model_overrides,
            recorder=self.recorder,  # only while replay.record is on (ADR 0079)
            model_wrapper=self.recorder.wrap_model,
            tool_runs=self.spending.tool_runs,  # a tool that ran runs once (ADR 0061)
            observer=self.metrics,
            agent_hooks=self.spending.meter,  # usage per turn and model, and metrics
        )
        self.model_router, self.mcp, self.shaping = shaped.model_router, shaped.mcp, shaped.shaping
        if self.model_router.on_demand(ORCHESTRATOR_ID):  # its tools' schemas when loaded
            ext.later_tools.append(load_tools_tool(self.model_router.tool_view))
        self.context, self.consent = shaped.context, shaped.consent
        self.tool_features = shaped.tool_features  # the tool call's layers (ADR 0079)
        self.orchestrator = shaped.orchestrator
        self.hook_registry, self.hooks = self.shaping.registry, self.shaping.hooks
        self.metrics.watch_models(self.model_router.health, self.spending.meter)
        # the stable prefix in a local server's cache before the first message (ADR 0089)
        self.warmer = PrefixWarmer(
            self.model_router,
            self.orchestrator,
            self.shaping.additions,
            keeps_server=settings.models.local_server.start,
        )

        turns = build_turns(
            settings,
            storage,
            bus,
            ext,
            shaped,
            household=self.household,
            observer=TurnObservers(
                [self.recorder, self.metrics] if self.recorder.enabled else [self.metrics]
            ),
            user_facing_errors=(ModelNotConfiguredError,),
            spending=self.spending,
        )
        self.router, self.agents = turns.router, turns.agents
        self.router.warmer = self.warmer  # progress while a local model reads (ADR 0098)
        self.person_files = turns.files
        self.workflows = self._workflows(ext.later_tools)  # ADR 0091
        self.mcp_desk = McpDesk(  # `main.py mcp` is a front of this kernel (ADR 0059)
            self.bus,
            self.household,
            lambda: self.orchestrator.tools,
            self.mcp_listing,
            self.settings.people,
        )
        self.router.register_channel(MCP_CHANNEL, self.mcp_desk.channel)
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
        # ADR 0032: /reload, the command line, dev.watch. A reload builds the new instance
        # with the services the loader was handed at load time (``Loader.services``), so
        # the services below can carry the reload door from their construction (ADR 0063)
        self.reloads = ReloadControl(
            ExtensionReloader(
                self.loader,
                self.supervision,
                self.wiring,
                self.bus,
                drain_s=settings.dev.reload_drain_s,
            ),
            self.bus,
            self.loader,
            settings.dev,
        )
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
            describe_post_processors=self.shaping.post.described,
            held_notices=self.router.notices.waiting,
            kept_file=self.person_files.find,
            keep_file=self.person_files.keep,
            is_wired=self.wiring.is_wired,
            operations=KernelOperator(self.status, self.bus.journal),
            shared=ServiceRegistry(shutdown_timeout_s=settings.loader.lifecycle_timeout_s),
            mcp=self.mcp_desk,  # http_api's /mcp (ADR 0059)
            node=self.scale.placement.node,
            leadership=self.scale.leadership,  # ADR 0036
            reload_extension=self.reloads.attempt,  # an extension's request_reload
        )

    def _workflows(self, later_tools: list[Any]) -> Workflows:
        """The workflows on the kernel's state database, driven by the leading worker;
        their tools join the kernel's, background tasks become their runs."""
        settings = self.settings
        store = WorkflowStore.at(
            self.data_dir / STATE_FILE, settings.storage, synchronous=settings.events.synchronous
        )
        router, placement = self.router, self.scale.placement

        async def run_agent(prompt: str, turn: TurnContext) -> str:
            return await router.runner.run_stateless(prompt, source="workflow", turn=turn)

        async def notify(text: str, channel: str | None, user: str | None, key: str) -> None:
            await router.notify_user(text, channel, user_id=user, key=key)

        powers = KernelPowers(
            tools=lambda: self.orchestrator.tools,
            gate=self.consent.gate,
            ui=self.consent.ui,
            run_agent=run_agent,
            notify=notify,
            leading=lambda: placement.runs_workers and self.scale.leadership().leader,
            observe=self.metrics.workflow,
        )
        workflows = Workflows(
            store,
            powers,
            settings.workflows,
            bus=self.bus,
            timezone=settings.timezone,
            recording=self.recorder,  # each run a replay session (ADR 0091)
        )
        later_tools.extend(workflow_tools(workflows))
        router.background = workflows.background
        return workflows

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
        await self.spending.open()
        await self.state.open()
        await self.workflows.open()
        await self.load()
        await self.scale.open(self.loader.records.values())  # this role's extensions only
        await reconcile_registrations(self.loader, self.state, self.bus, self.scale.roster)
        await self.mcp.connect()
        builtins = self.shaping.post.commands() + builtin_commands(
            help_text=self.commands.help_text,
            conversations=self.conversations,
            status=self.status,
            on_session_end=self.hooks.session_ended,
        )
        consent = self.consent.commands(lambda: self.orchestrator.tools, lambda: self.mcp.active)
        managing = extension_commands(self.loader, self.consent.ui)  # /grant, /setup
        builtins.append(self.spending.command())  # /usage
        kernel_commands = [*builtins, *managing, self.reloads.command(), self.skills.command()]
        kernel_commands += workflow_commands(self.workflows)
        for command in [*kernel_commands, *consent]:
            self.commands.add("kernel", command)
        self.wiring.attach(self.router, on_change=self._wiring_changed)
        self.router.subscribe()
        if self.scale.placement.runs_workers:
            self.scheduler.subscribe()
        self.reloads.subscribe()
        if self.scale.placement.runs_workers:
            self.mcp_desk.subscribe()
        await self.loader.start_all()
        await self._forget_released_subscriptions()
        await self.workflows.sync_extensions(self.wiring.wired())
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
        self.context.invalidate()
        self.warmer.want()  # a new prefix (tools, additions, model) to warm

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
                if self.scale.placement.runs_workers:  # a channels node runs no turn
                    tasks.append(group.create_task(self.warmer.run(), name="prompt-warm"))
                    tasks.append(group.create_task(self.workflows.executor.run(), name="workflows"))
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
            ("workflow runs", self.workflows.executor.stop),
            ("approval timers", self.consent.stop),
            ("reloads under way", self.reloads.aclose),
            ("event bus", self.bus.stop),
            ("MCP servers", self.mcp.cleanup),
            ("extensions", self.loader.shutdown),
            ("shared services", self.services.shared.aclose),
            ("wiring", self.wiring.detach),
            ("conversations", self.conversations.aclose),
            ("post-processing records", self.shaping.post.aclose),
            ("usage book", self.spending.aclose),
            ("approvals", self.consent.aclose),
            ("held notifications", self.router.notices.aclose),
            ("extension state", self.state.aclose),
            ("workflows", self.workflows.aclose),
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

    def tool_stacks(self) -> StackedTools:
        """The wired extensions' tool stacks (what the orchestrator gets), for ``/status``."""
        return self.tool_stacking.stacked(self.wiring.wired())

    def mcp_listing(self) -> list[dict[str, Any]]:
        """The tools an MCP client is offered: of the wired extensions once started,
        of the loaded ones in a kernel only loaded (``main.py mcp`` with no kernel
        running, ADR 0074)."""
        records = self.wiring.wired() if self.ready.is_set() else self.loader.active()
        return mcp_listing(self.tool_stacking.stacked(records), self.loader.records)


@contextlib.asynccontextmanager
async def kernel_apart(settings: Settings, purpose: str) -> AsyncIterator[Kernel]:
    """A kernel on a journal of its own in a temporary directory, for a command that
    loads the extensions to read what they declare (``extensions``, ``grant``,
    ``skills``, ``setup``) beside a running kernel without touching its events; the
    caller loads it, and its extensions and bus are shut down on the way out."""
    with tempfile.TemporaryDirectory(prefix=f"hearth-{purpose}-") as tmp:
        kernel = Kernel(settings, journal_path=Path(tmp) / JOURNAL_FILE)
        try:
            yield kernel
        finally:
            await kernel.loader.shutdown()
            await kernel.bus.stop()


def _private_data_dir(settings: Settings, journal_path: Path | None) -> None:
    """The data directory 0700 and the kernel's databases 0600, never through a
    symlink (ADR 0048); PostgreSQL keeps them elsewhere."""
    data_dir = settings.data_dir
    kernel_files = (JOURNAL_FILE, SESSIONS_FILE, SCHEDULES_FILE, STATE_FILE)
    refuse_symlinks(
        *(
            data_dir / f"{name}{suffix}"
            for name in kernel_files
            for suffix in ("", "-wal", "-shm", "-journal")
        )
    )
    make_private(data_dir)
    if settings.storage.backend == "sqlite":
        for name in kernel_files[1:] if journal_path else kernel_files:
            create_private(data_dir / name)


async def _logged_step(name: str, step: Callable[[], Awaitable[None] | None]) -> None:
    try:
        result = step()
        if result is not None:
            await result
    except Exception:
        log.exception("kernel stop: %s failed; the other steps still run", name)
        raise
