"""Bootstrap and shutdown of one kernel process (seed 002 "Bootstrap Flow").

``Kernel.start()`` opens the journal, loads and initializes extensions, wires
them (channels, commands, tools, subscriptions), builds the orchestrator and
starts the bus and the extensions. ``Kernel.stop()`` drains the bus, then
stops and destroys the extensions in reverse dependency order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents.models.interface import Model

from core.agents.declarative import DeclarativeAgentAdapter
from core.agents.errors import ModelNotConfiguredError
from core.agents.mcp_servers import McpServers
from core.agents.model_router import ModelRouter, configure_tracing
from core.agents.orchestrator import Orchestrator
from core.agents.toolset import build_toolset
from core.datadir import migrate_extension_data, refuse_symlinks
from core.events import EventBus
from core.extensions.context import KernelServices
from core.extensions.isolation.factory import isolated_factory
from core.extensions.loader import Loader
from core.extensions.manifest import Manifest
from core.extensions.supervision import ExtensionSupervisor
from core.kernel.agents import KernelAgents
from core.kernel.builtin_commands import builtin_commands
from core.kernel.commands import CommandRegistry
from core.kernel.context_chain import ContextChain
from core.kernel.conversations import Conversations
from core.kernel.router import MessageRouter
from core.kernel.wiring import wire_channels, wire_commands, wire_manifest_subscriptions
from core.lifecycle import write_restart_request
from core.logging_setup import REDACTOR
from core.scheduling import ManifestScheduler, manifest_schedules
from core.secrets import load_secrets
from core.settings import Settings
from core.tools import build_core_tools

log = logging.getLogger("core.kernel.runner")

JOURNAL_FILE = "events.db"
SESSIONS_FILE = "sessions.db"
SCHEDULES_FILE = "schedules.db"


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
        self.data_dir.mkdir(parents=True, exist_ok=True)
        refuse_symlinks(
            *(
                self.data_dir / f"{name}{suffix}"
                for name in (JOURNAL_FILE, SESSIONS_FILE, SCHEDULES_FILE)
                for suffix in ("", "-wal", "-shm", "-journal")
            )
        )
        self.secrets = load_secrets()
        self.restart_requested: str | None = None
        self._stop_requested = asyncio.Event()
        self.bus = EventBus.from_settings(
            journal_path or self.data_dir / JOURNAL_FILE, settings.events
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
        )
        self.loader.isolated_factory = isolated_factory(settings, self.loader)
        self.loader.on_discovered = self._before_extension_code
        self.scheduler = ManifestScheduler(
            self.bus, self.data_dir / SCHEDULES_FILE, lookup=self.loader.instance
        )
        self.commands = CommandRegistry()
        self.conversations = Conversations(self.data_dir / SESSIONS_FILE)
        self.context = ContextChain(self._context_providers)
        self.agents = KernelAgents(self)
        self.router: MessageRouter | None = None
        self.services = KernelServices(
            settings=settings,
            bus=self.bus,
            get_instance=self.loader.instance,
            request_restart=self.request_restart,
            request_shutdown=self.request_shutdown,
            secrets=self.secrets,
            agents=self.agents,
            list_commands=self.commands.names_and_descriptions,
        )
        self.supervision = ExtensionSupervisor(
            self.loader,
            health_interval_s=settings.loader.health_check_interval_s,
            backoff_max_s=settings.loader.restart_backoff_max_s,
        )
        self.ready = asyncio.Event()

    # ------------------------------------------------------------ bootstrap

    async def load(self) -> None:
        """Discover, load and initialize extensions (no start): ``main.py extensions``."""
        await self.loader.load_all(self.services)

    def _before_extension_code(self, manifests: list[Manifest]) -> None:
        """After manifests are validated, before any extension is imported."""
        self._redact_secrets(manifests)
        migrate_extension_data(self.data_dir, [m.id for m in manifests])

    def _redact_secrets(self, manifests: list[Manifest]) -> None:
        """Values of declared secrets and model API keys never reach a log line
        (filled before ``initialize``, which may already log them)."""
        for manifest in manifests:
            REDACTOR.add(self.secrets.get(name, "") for name in manifest.secrets)
        for provider in self.settings.models.providers.values():
            REDACTOR.add([provider.api_key or "", self.secrets.get(provider.api_key_env or "", "")])

    async def start(self) -> None:
        """Everything up to "ready": extensions loaded, wired and started."""
        await self.conversations.open()
        await self.load()
        await self.mcp.connect()
        self.router = MessageRouter(
            bus=self.bus,
            conversations=self.conversations,
            commands=self.commands,
            context=self.context,
            orchestrator=self._build_orchestrator(),
            default_channel=self.settings.channels.default,
            user_facing_errors=(ModelNotConfiguredError,),
        )
        self._wire(self.router)
        await self.bus.start()
        await self.loader.start_all()
        await self._forget_released_subscriptions()
        await self.scheduler.start(
            manifest_schedules(self.loader.active("SchedulerProvider"), self.settings.timezone)
        )
        self.ready.set()
        log.info(
            "kernel ready: %d extensions active, model %s",
            len(self.loader.active()),
            self.model_router.describe("orchestrator"),
        )

    async def _forget_released_subscriptions(self) -> None:
        """Journal rows of subscriptions a started extension no longer makes are dropped."""
        for record in self.loader.active():
            forgotten = await self.bus.forget_subscribers(f"{record.ext_id}/")
            if forgotten:
                log.info(
                    "extension %s: forgot %d subscriptions it no longer holds",
                    record.ext_id,
                    len(forgotten),
                )

    def _build_orchestrator(self) -> Orchestrator:
        """Core tools first, then extension tools and agents (first name wins)."""
        toolset = build_toolset(
            [
                ("core", self._core_tools()),
                *[(r.ext_id, r.tools) for r in self.loader.active("ToolProvider")],
            ],
            [(r.ext_id, r.instance) for r in self.loader.active("AgentProvider")],
        )
        return Orchestrator(
            model_router=self.model_router,
            timezone=self.settings.timezone,
            tools=toolset.tools,
            agent_tools=toolset.agent_tools,
            capabilities=toolset.capabilities,
            mcp_servers=self.mcp.active,
        )

    def _wire(self, router: MessageRouter) -> None:
        """Commands, channels and subscriptions; all before the bus starts."""
        for command in builtin_commands(self):
            self.commands.add("kernel", command)
        wire_commands(self.loader, self.commands)
        wire_channels(self.loader, router)
        wire_manifest_subscriptions(self.loader, self.bus, router)
        router.subscribe()
        self.scheduler.subscribe()

    async def run(self) -> None:
        """Start, serve until a stop is requested, stop."""
        try:
            await self.start()
            async with asyncio.TaskGroup() as group:
                supervision = group.create_task(
                    self.supervision.run(), name="extension-supervision"
                )
                await self._stop_requested.wait()
                supervision.cancel()
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Stop the schedule timer, drain the bus, then stop and destroy extensions."""
        await self.scheduler.stop()
        await self.bus.stop()
        await self.mcp.cleanup()
        await self.loader.shutdown()
        self.conversations.close()
        await self.model_router.aclose()
        log.info("kernel stopped")

    # ------------------------------------------------------------ control

    def request_shutdown(self) -> None:
        self._stop_requested.set()

    def request_restart(self, reason: str) -> None:
        log.info("restart requested: %s", reason)
        self.restart_requested = reason
        write_restart_request(self.data_dir, reason)
        self._stop_requested.set()

    @property
    def uptime_s(self) -> float:
        return time.monotonic() - self.started_at

    # ------------------------------------------------------------ helpers

    def _core_tools(self) -> list[Any]:
        return list(
            build_core_tools(
                timezone=self.settings.timezone,
                list_extensions=self.loader.report,
                request_restart=self.request_restart,
            )
        )

    def _context_providers(self) -> list[tuple[str, Any]]:
        return [(r.ext_id, r.instance) for r in self.loader.active("ContextProvider") if r.started]

    def _make_agent(self, manifest: Manifest, ext_dir: Path, services: KernelServices) -> Any:
        return DeclarativeAgentAdapter(
            manifest, ext_dir, self.model_router, self.agents.resolve_tools
        )
