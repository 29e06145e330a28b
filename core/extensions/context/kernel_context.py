"""``ExtensionContext``: everything an extension may ask of the kernel.

One instance per extension. It enforces the manifest: secrets must be
declared, ``get_extension`` only reaches ``depends_on``, emits and
subscriptions must match ``permissions``, and the calls that speak to the
user, speak as the user, drive the agent or stop the kernel need
``notify``, ``user_messages``, ``agent`` or ``control``, and reading the
kernel's status needs ``status`` (SPEC §2, §6; ADR 0024).
Isolated extensions are served by this same class over RPC, so one check
covers both. Notifications and agent requests are rate-limited per extension.
State calls reach the kernel's one store always under this extension's own id,
in the session of the turn being served (``state_scope``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from core.events.system_payloads import (
    AgentBackground,
    AgentTask,
    UiAnswer,
    UserMessage,
    UserNotify,
)
from core.events.topics import SystemTopics, pattern_within, topic_matches
from core.extensions.access.rate_limit import RateLimit
from core.extensions.access.served_calls import served_turn
from core.extensions.access.topic_rules import GUARDED_TOPICS, KERNEL_ONLY
from core.extensions.context.handlers import logged_handler, when_wired
from core.extensions.context.services import KernelOperations, KernelServices
from core.extensions.context.shared_services import ExtensionServices
from core.extensions.context.state import ContextStateCalls
from core.extensions.context.store_location import extension_storage
from core.extensions.contract import (
    AgentDescriptor,
    AgentInvocationContext,
    AgentResponse,
    EventHandler,
    Leadership,
    McpAnswer,
    McpOp,
    StoreLocation,
)
from core.extensions.contract.context import ExtensionContext
from core.extensions.contract.files import KeptFile
from core.extensions.contract.permissions import declared_needs
from core.extensions.contract.status import KernelStatus
from core.extensions.errors import NotAvailableError, PermissionDeniedError, SecretNotDeclaredError
from core.extensions.loading.isolation_choice import ISOLATED, isolation_of
from core.extensions.loading.manifest import Manifest
from core.runtime import extension_data_dir, guard_extension_logger

# what each context method needs, as the contract declares it beside the method
_NEEDS = declared_needs(ExtensionContext)


class KernelContext(ContextStateCalls):
    """The kernel's implementation of ``contract.ExtensionContext`` (state calls:
    ``ContextStateCalls``)."""

    def __init__(
        self,
        manifest: Manifest,
        ext_dir: Path,
        services: KernelServices,
        code_dir: Path | None = None,
    ) -> None:
        self.extension_id = manifest.id
        self.logger = guard_extension_logger(logging.getLogger(f"ext.{manifest.id}"))
        self._manifest = manifest
        self._ext_dir = ext_dir
        # the snapshot its code runs from (ADR 0073): its agent's prompt is read there
        self._code_dir = code_dir or ext_dir
        self._services = services
        isolated = isolation_of(manifest, services.settings.isolation.default) in ISOLATED
        self.permissions = manifest.permissions.resolved(manifest.id, isolated=isolated)
        overrides = services.settings.extensions.get(manifest.id) or {}
        self._config: dict[str, Any] = {**manifest.config, **overrides}
        if "timezone" in manifest.config and self._config["timezone"] is None:
            # a manifest declaring `timezone: null` means "the kernel's timezone setting"
            self._config["timezone"] = services.settings.timezone
        self.subscriptions: list[str] = []
        self._handlers: dict[str, tuple[str, EventHandler]] = {}  # id -> (topic, as subscribed)
        self._held = False  # subscriptions kept off the bus during a reload
        self._shared = ExtensionServices(services.shared, manifest.id)
        self._control_refusals = 0
        limits = services.settings.rate_limits
        self._notify_limit = RateLimit(
            manifest.id, "notify_user", limits.notify_per_minute, limits.notify_burst, self.logger
        )
        self._agent_limit = RateLimit(
            manifest.id,
            "request the agent",
            limits.agent_requests_per_minute,
            limits.agent_requests_burst,
            self.logger,
        )

    def _require(self, allowed: bool, key: str, what: str) -> None:
        """Refuse ``what`` unless the manifest declares ``permissions.<key>: true``."""
        if not allowed:
            raise PermissionDeniedError(
                self.extension_id,
                f"{what} (declare `permissions.{key}: true` in its manifest)",
            )

    def _allow(self, method: str) -> None:
        """Refuse ``method`` unless the manifest grants every permission the contract
        declares for it (``@needs`` beside the method, issue 42), in its words."""
        for need in _NEEDS[method]:
            key = need.permission.key
            if not getattr(self.permissions, key):  # the refusal only: a call costs one frame
                self._require(False, key, need.what)

    def _require_agent(self, method: str) -> None:
        self._allow(method)
        self._agent_limit.take()

    # ------------------------------------------------------------ identity

    @property
    def config(self) -> dict[str, Any]:
        return dict(self._config)

    @property
    def services(self) -> ExtensionServices:
        return self._shared

    @property
    def data_dir(self) -> Path:
        path = extension_data_dir(self._services.settings.data_dir, self.extension_id)
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def storage(self) -> StoreLocation:
        settings = self._services.settings
        return extension_storage(settings.data_dir, settings.storage, self.extension_id)

    @property
    def extension_dir(self) -> Path:
        return self._ext_dir

    def get_config(self, key: str, default: Any = None) -> Any:
        value = self._config.get(key)
        return default if value is None else value

    def get_secret(self, name: str) -> str | None:
        if name not in self._manifest.secret_names:
            raise SecretNotDeclaredError(self.extension_id, name)
        return self._services.secrets.get(name) or None

    def get_extension(self, ext_id: str) -> Any | None:
        if ext_id not in self._manifest.depends_on:
            return None
        return self._services.get_instance(ext_id)

    # ------------------------------------------------------------ event bus

    async def emit(
        self,
        topic: str,
        payload: dict[str, Any],
        correlation_id: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> int:
        if not any(topic_matches(p, topic) for p in self.permissions.emit):
            raise PermissionDeniedError(self.extension_id, f"emit topic {topic!r}")
        owned = next((w for p, w in KERNEL_ONLY.items() if topic.startswith(p)), None)
        if owned is not None:
            raise PermissionDeniedError(self.extension_id, f"emit topic {topic!r}: {owned}")
        guard = GUARDED_TOPICS.get(topic)
        if guard is not None:  # the same act as the guarded call, by another door
            self._require(getattr(self.permissions, guard), guard, f"emit topic {topic!r}")
        if guard == "user_messages":  # the user's words, answers and cancels: its own channel
            channel = self._own_channel(payload.get("channel_id"), f"emit topic {topic!r}")
            payload = {**payload, "channel_id": channel}
        return await self._publish(topic, payload, correlation_id, idempotency_key)

    def check_subscribe(self, topic: str) -> None:
        """Refuse ``topic`` unless it lies within ``permissions.subscribe`` (a
        subscription of the code or of the manifest's ``events.subscribes``)."""
        if not any(pattern_within(topic, p) for p in self.permissions.subscribe):
            raise PermissionDeniedError(self.extension_id, f"subscribe to {topic!r}")

    def subscribe_event(self, topic: str, handler: EventHandler) -> None:
        self.check_subscribe(topic)
        cap = self._services.settings.loader.max_subscriptions
        if len(self.subscriptions) >= cap:
            raise PermissionDeniedError(
                self.extension_id,
                f"subscribe to {topic!r}: it holds {cap} subscriptions already "
                "(loader.max_subscriptions)",
            )
        name = getattr(handler, "__qualname__", type(handler).__name__)
        subscriber_id = f"{self.extension_id}/{topic}/{name}"
        gate = when_wired(self.extension_id, self._services.is_wired, self.logger)
        wrapped = gate(logged_handler(handler, self.logger))
        if not self._held:
            self._services.bus.subscribe(topic, wrapped, subscriber_id)
        self.subscriptions.append(subscriber_id)
        self._handlers[subscriber_id] = (topic, wrapped)

    def release_subscriptions(self) -> None:
        """Unsubscribe every handler, and hold new ones until ``resume_subscriptions``
        (a reload, ADR 0032: events wait in the journal, cursors kept, instead of
        reaching an extension that is not wired)."""
        if not self._held:
            for subscriber_id in self.subscriptions:
                self._services.bus.unsubscribe(subscriber_id)
        self._held = True

    def resume_subscriptions(self) -> None:
        """Subscribe what was released or held; they catch up from their cursors."""
        if self._held:
            for subscriber_id in self.subscriptions:
                topic, handler = self._handlers[subscriber_id]
                self._services.bus.subscribe(topic, handler, subscriber_id)
        self._held = False

    async def notify_user(
        self, text: str, channel_id: str | None = None, *, user_id: str | None = None
    ) -> None:
        self.check_notify()
        payload = UserNotify(text=text, channel_id=channel_id, user_id=user_id).to_payload()
        await self._publish(SystemTopics.USER_NOTIFY, payload)

    def check_notify(self) -> None:
        """Spend one notification: ``permissions.notify`` and the rate limit (the
        call above, and a manifest's ``notify_user`` subscription, ADR 0044)."""
        self._allow("notify_user")
        self._notify_limit.take()

    async def request_agent_task(self, prompt: str, channel_id: str | None = None) -> None:
        self._require_agent("request_agent_task")
        payload = AgentTask(prompt=prompt, channel_id=channel_id).to_payload()
        await self._publish(SystemTopics.AGENT_TASK, payload)

    async def request_agent_background(
        self, prompt: str, correlation_id: str | None = None
    ) -> None:
        self._require_agent("request_agent_background")
        payload = AgentBackground(prompt=prompt, correlation_id=correlation_id).to_payload()
        await self._publish(SystemTopics.AGENT_BACKGROUND, payload, correlation_id)

    async def on_user_message(
        self,
        text: str,
        user_id: str,
        channel_id: str | None = None,
        message_id: str | None = None,
        *,
        idempotency_key: str | None = None,
        sender_id: str | None = None,
        files: Sequence[str] = (),
    ) -> int:
        self._allow("on_user_message")
        if await self._services.ui.typed_secret(text, self.extension_id, user_id, sender_id):
            return 0  # a secret typed as "/answer ID ...": answered in memory (ADR 0048)
        payload = UserMessage(
            text=text,
            user_id=user_id,
            channel_id=self._own_channel(channel_id, "speak as the user"),
            message_id=message_id,
            sender_id=sender_id,
            origin=self._services.node,
            files=",".join(files) or None,
        ).to_payload()
        return await self._publish(SystemTopics.USER_MESSAGE, payload, None, idempotency_key)

    async def answer_request(
        self, request_id: str, answer: str, user_id: str, *, sender_id: str | None = None
    ) -> None:
        """The user's answer to a question this channel showed: journaled, so it
        survives a crash; the kernel checks conversation and sender (ADR 0021).
        A ``secret`` question's answer is handed over in memory, never journaled
        (ADR 0048)."""
        self._allow("answer_request")
        ui = self._services.ui
        if await ui.answer_off_record(request_id, answer, self.extension_id, user_id, sender_id):
            return
        payload = UiAnswer(
            request_id=request_id,
            answer=answer,
            channel_id=self.extension_id,
            user_id=user_id,
            sender_id=sender_id,
        ).to_payload()
        await self._publish(SystemTopics.UI_ANSWER, payload)

    async def ui_request(
        self,
        kind: str,
        prompt: str,
        options: Sequence[str] = (),
        *,
        timeout_s: float | None = None,
    ) -> str | None:
        """Ask the user of the turn the kernel is serving to this extension, while it
        does (ADR 0043): a question draws on the notification budget and says who asks."""
        self._allow("ui_request")
        turn = served_turn(self.extension_id)
        if turn is None:
            raise NotAvailableError(
                f"{self.extension_id}: ui_request works only while the kernel is calling this "
                "extension in a turn (its tool, command, hook or context provider), "
                "not outside one nor after that call returned"
            )
        self._notify_limit.take()
        shown = f"{self.extension_id} asks: {prompt}"
        chosen = list(options)
        return await self._services.ui.ask(self.extension_id, turn, kind, shown, chosen, timeout_s)

    def _own_channel(self, channel_id: Any, what: str) -> str:
        """The channel a user's message, answer or cancel comes from: always the
        extension that sends it — speaking on another channel would let it answer
        that channel's questions as its user (ADR 0043)."""
        if channel_id not in (None, self.extension_id):
            raise PermissionDeniedError(
                self.extension_id,
                f"{what} on channel {str(channel_id)[:80]!r}: "
                "an extension speaks for the user only on its own channel",
            )
        return self.extension_id

    async def _publish(
        self,
        topic: str,
        payload: dict[str, Any],
        correlation_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> int:
        return await self._services.bus.publish(
            topic,
            self.extension_id,
            payload,
            correlation_id=correlation_id,
            idempotency_key=idempotency_key,
        )

    # ------------------------------------------------------------ agents

    async def invoke_agent(self, prompt: str) -> str:
        self._require_agent("invoke_agent")
        return await self._services.agents.invoke_agent(prompt, source=self.extension_id)

    async def invoke_agent_streamed(
        self,
        prompt: str,
        on_chunk: Callable[[str], Awaitable[None]] | None = None,
        on_tool_call: Callable[[str], Awaitable[None]] | None = None,
    ) -> str:
        self._require_agent("invoke_agent_streamed")
        return await self._services.agents.invoke_agent_streamed(
            prompt, source=self.extension_id, on_chunk=on_chunk, on_tool_call=on_tool_call
        )

    async def enrich_prompt(self, prompt: str, agent_id: str | None = None) -> str:
        self._require_agent("enrich_prompt")
        return await self._services.agents.enrich_prompt(prompt, agent_id)

    @property
    def agent_id(self) -> str:
        return self._manifest.resolved_agent_id

    @property
    def agent_model(self) -> str | None:
        return self._manifest.agent.model if self._manifest.agent else None

    @property
    def model_router(self) -> Any:
        return self._services.agents.model_router

    @property
    def resolved_tools(self) -> list[Any]:
        uses = self._manifest.agent.uses_tools if self._manifest.agent else []
        return self._services.agents.resolve_tools(list(uses))

    @property
    def resolved_instructions(self) -> str:
        return self._services.agents.resolve_instructions(self._manifest, self._code_dir)

    @property
    def agent_descriptor(self) -> AgentDescriptor:
        agent = self._services.agents.declared_agent(self._manifest, self._code_dir, [])
        descriptor: AgentDescriptor = agent.get_agent_descriptor()
        return descriptor

    async def run_agent(
        self,
        task: str,
        context: AgentInvocationContext | None = None,
        *,
        extra_tools: Sequence[Any] = (),
    ) -> AgentResponse:
        agent = self._services.agents.declared_agent(
            self._manifest, self._code_dir, list(extra_tools)
        )
        response: AgentResponse = await agent.invoke(task, context)
        return response

    # ------------------------------------------------------------ system

    async def list_commands(self) -> list[tuple[str, str]]:
        return self._services.list_commands()

    async def kernel_status(self) -> KernelStatus:
        self._allow("kernel_status")
        return await self._operations().status()

    async def requeue_dead_letter(self, event_id: int) -> int:
        self._allow("requeue_dead_letter")
        return await self._operations().requeue(event_id)

    async def mcp_request(
        self, op: McpOp, user_id: str, name: str | None = None, arguments: str = "{}"
    ) -> McpAnswer:
        self._allow("mcp_request")
        desk = self._services.mcp
        if desk is None:
            raise NotAvailableError("this kernel serves no MCP clients (it is not running)")
        # the person is whoever user_id is on this extension's own channel, never another's
        return await desk.serve(self.extension_id, user_id, op, name, arguments)

    async def leadership(self) -> Leadership:
        return self._services.leadership()

    def _operations(self) -> KernelOperations:
        if self._services.operations is None:
            raise NotAvailableError("this kernel offers no status (it is not running)")
        return self._services.operations

    async def list_post_processors(
        self, user_id: str, channel_id: str | None = None
    ) -> list[tuple[str, str]]:
        return await self._services.list_post_processors(channel_id or self.extension_id, user_id)

    async def describe_post_processors(
        self, user_id: str, channel_id: str | None = None
    ) -> dict[str, Any]:
        return await self._services.describe_post_processors(
            channel_id or self.extension_id, user_id
        )

    async def held_notices(self, channel_id: str, user_id: str) -> list[str]:
        return await self._services.held_notices(self.extension_id, channel_id, user_id)

    async def kept_file(
        self, user_id: str, file_id: str, channel_id: str | None = None
    ) -> KeptFile | None:
        return await self._services.kept_file(channel_id or self.extension_id, user_id, file_id)

    async def keep_file(
        self,
        user_id: str,
        name: str,
        mime_type: str,
        path: str,
        channel_id: str | None = None,
    ) -> KeptFile:
        keep = self._services.keep_file
        if keep is None:
            raise NotAvailableError("this kernel keeps no files (it is not running)")
        return await keep(channel_id or self.extension_id, user_id, name, mime_type, path)

    def request_restart(self) -> None:
        self._require_control(lambda: self._allow("request_restart"))
        self._services.request_restart(f"requested by extension {self.extension_id}")

    async def request_reload(self, ext_id: str) -> tuple[bool, str]:
        """Reload another extension from its files (ADR 0032): (reloaded, sentence)."""
        what = f"reload extension {ext_id!r}"
        self._require_control(lambda: self._require(self.permissions.control, "control", what))
        reload = self._services.reload_extension
        if reload is None or ext_id == self.extension_id:  # its own calls would never drain
            raise NotAvailableError(f"{self.extension_id}: reloading {ext_id!r} is not possible")
        return await reload(ext_id)

    def request_shutdown(self) -> None:
        self._require_control(lambda: self._allow("request_shutdown"))
        self._services.request_shutdown()

    def _require_control(self, check: Callable[[], None]) -> None:
        """``check`` (of ``permissions.control``), its refusal logged too (on a decimal
        scale, so a loop cannot flood the log): over RPC these calls are notifications."""
        try:
            check()
        except PermissionDeniedError as exc:
            self._control_refusals += 1
            if math.log10(self._control_refusals).is_integer():  # 1st, 10th, 100th, ...
                self.logger.warning("refused (%d so far): %s", self._control_refusals, exc)
            raise
