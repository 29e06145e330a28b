"""Status-aware wiring: only live extensions get traffic.

``Wiring`` connects one extension's channels, commands, tools, context
provider and manifest subscriptions to the kernel, and can take them away
again (``unwire``, as pluggy's ``unregister``). It watches every record's
status transitions, so an extension whose ``start()`` raised, that the
supervisor marked unhealthy or whose plugin host died gets nothing, and is
wired again the moment it is restarted and ``active``. ``/status`` and
``extensions --json`` read the same records, so they agree with it.

Manifest subscriptions stay while an extension is unwired (their handlers
check ``is_wired`` and drop what arrives meanwhile); a reload releases them
and ``wire`` subscribes what the new manifest declares (ADR 0032). Their
topics and handlers were checked against the extension's permissions at
discovery, and each ``notify_user`` message spends the extension's
notification rate limit like ``context.notify_user`` (ADR 0044).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from core.events import EventBus
from core.events.models import Event
from core.events.system_payloads import UserNotify, read_system_payload
from core.extensions.contract import AgentInvocationContext, Command
from core.extensions.errors import PermissionDeniedError
from core.extensions.loading.capabilities import Capability
from core.extensions.loading.lifecycle import describe_exception
from core.extensions.loading.loader import Loader
from core.extensions.loading.records import ExtensionRecord, ExtensionStatus
from core.kernel.commands.table import CommandRegistry

log = logging.getLogger("core.kernel.wiring")


class ChannelTarget(Protocol):
    """What wiring needs of the router: a channel table and proactive sends."""

    def register_channel(self, channel_id: str, channel: Any) -> None: ...

    def unregister_channel(self, channel_id: str) -> None: ...

    async def notify_user(
        self,
        text: str,
        channel_id: str | None = None,
        *,
        user_id: str | None = None,
        key: str | None = None,
        source: str = ...,
    ) -> None: ...


def _nothing() -> None:
    return None


class Wiring:
    """Which extensions are connected to the kernel, kept in step with their status."""

    def __init__(
        self,
        loader: Loader,
        bus: EventBus,
        commands: CommandRegistry,
    ) -> None:
        self._loader = loader
        self._bus = bus
        self._commands = commands
        self._on_change: Callable[[], None] = _nothing
        self._router: ChannelTarget | None = None
        self._wired: set[str] = set()
        self._subscribed: set[str] = set()
        self._watched: list[ExtensionRecord] = []

    # ------------------------------------------------------------ queries

    def is_wired(self, ext_id: str) -> bool:
        return ext_id in self._wired

    def wired(self, capability: Capability | None = None) -> list[ExtensionRecord]:
        """Wired records in load order, optionally only those with ``capability``."""
        return [r for r in self._loader.active(capability) if r.ext_id in self._wired and r.started]

    # ------------------------------------------------------------ lifecycle

    def attach(self, router: ChannelTarget, on_change: Callable[[], None] = _nothing) -> None:
        """Watch every record; wire those live now, the rest when they become live.
        ``on_change``: what was built from the wired extensions is to be rebuilt."""
        self._router = router
        self._on_change = on_change
        for record in self._loader.records.values():
            if record not in self._watched:
                record.watchers.append(self._on_transition)
                self._watched.append(record)
            self._on_transition(record, record.status)

    def detach(self) -> None:
        """Stop watching and unwire everything (kernel stop)."""
        for record in self._watched:
            if self._on_transition in record.watchers:
                record.watchers.remove(self._on_transition)
            if record.ext_id in self._wired:
                self.unwire(record)
        self._watched.clear()

    def _on_transition(self, record: ExtensionRecord, previous: ExtensionStatus) -> None:
        if record.live and record.ext_id not in self._wired:
            self.wire(record)
        elif not record.live and record.ext_id in self._wired:
            self.unwire(record)

    # ------------------------------------------------------------ wire / unwire

    def wire(self, record: ExtensionRecord) -> None:
        """Give one live extension its traffic: channel, commands, tools, context, events."""
        if self._router is None:
            raise RuntimeError("Wiring.wire() before attach(): the router is not known yet")
        self._wired.add(record.ext_id)
        if Capability.CHANNEL in record.capabilities:
            self._router.register_channel(record.ext_id, record.instance)
        if Capability.COMMAND in record.capabilities:
            for command in self._provided_commands(record):
                gated = command if record.calls is None else record.calls.command(command)
                self._commands.add(record.ext_id, gated)
        self._subscribe_manifest(record, self._router)
        log.info("wired %s", record.ext_id)
        self._on_change()

    def unwire(self, record: ExtensionRecord) -> None:
        """Take everything away from one extension (it failed, stopped or is reloaded)."""
        self._wired.discard(record.ext_id)
        if self._router is not None and Capability.CHANNEL in record.capabilities:
            self._router.unregister_channel(record.ext_id)
        self._commands.remove_owner(record.ext_id)
        log.info("unwired %s (%s)", record.ext_id, record.error or record.status.value)
        self._on_change()

    def release_subscriptions(self, ext_id: str) -> None:
        """Unsubscribe the manifest subscriptions of ``ext_id`` (a reload, ADR 0032):
        ``wire`` subscribes what the manifest then declares; the journal cursors
        stay, so nothing published meanwhile is lost."""
        for subscriber_id in [s for s in self._subscribed if s.startswith(f"{ext_id}/")]:
            self._bus.unsubscribe(subscriber_id)
            self._subscribed.discard(subscriber_id)

    @staticmethod
    def _provided_commands(record: ExtensionRecord) -> list[Command]:
        try:
            return list(record.instance.get_commands())
        except Exception as exc:
            log.error("get_commands of %s failed: %s", record.ext_id, describe_exception(exc))
            return []

    def _subscribe_manifest(self, record: ExtensionRecord, router: ChannelTarget) -> None:
        """``events.subscribes`` with ``notify_user`` / ``invoke_agent`` (``custom``
        is left to the extension); subscribed once, gated on ``is_wired``."""
        if record.manifest is None:
            return
        for sub in record.manifest.events.subscribes:
            subscriber_id = f"{record.ext_id}/{sub.topic}/{sub.handler}"
            if subscriber_id in self._subscribed:
                continue
            if sub.handler == "notify_user":
                handler = self._notify_handler(record, router)
            elif sub.handler == "invoke_agent":
                if Capability.AGENT not in record.capabilities:
                    log.error(
                        "%s: events.subscribes %s uses invoke_agent but it is not an agent",
                        record.ext_id,
                        sub.topic,
                    )
                    continue
                handler = self._agent_handler(record, router)
            else:
                continue
            self._bus.subscribe(sub.topic, handler, subscriber_id)
            self._subscribed.add(subscriber_id)

    def _delivers(self, ext_id: str, event: Event) -> bool:
        if ext_id in self._wired:
            return True
        log.warning("%s is not active: event %s (%s) not delivered", ext_id, event.id, event.topic)
        return False

    def _notify_handler(self, record: ExtensionRecord, router: ChannelTarget) -> Any:
        ext_id = record.ext_id

        async def notify(event: Event) -> None:
            # a custom topic routed to notify_user: its own extra keys are fine, `text` is not
            notice = read_system_payload(UserNotify, event, strict=False, subscriber="notify_user")
            if notice is None or not notice.text or not self._delivers(ext_id, event):
                return
            try:  # the checks of context.notify_user: permissions.notify, the rate limit
                if record.context is None:
                    raise PermissionDeniedError(ext_id, "notify the user (it is not loaded)")
                record.context.check_notify()
            except PermissionDeniedError as exc:  # RateLimitedError is one too
                log.debug("%s: event %s not sent to the user: %s", ext_id, event.id, exc)
                return  # dropped, not retried: the rate limit logs a summary per window
            await router.notify_user(
                notice.text,
                notice.channel_id,
                user_id=notice.user_id,
                key=f"notify:{ext_id}:{event.id}",  # forwarded once to another node
                source=ext_id,
            )

        return notify

    def _agent_handler(self, record: ExtensionRecord, router: ChannelTarget) -> Any:
        async def invoke(event: Event) -> None:
            if not self._delivers(record.ext_id, event):
                return
            payload = event.payload
            task = payload.get("prompt") or payload.get("text") or json.dumps(payload)
            context = AgentInvocationContext(correlation_id=event.correlation_id)
            response = await record.instance.invoke(str(task), context)
            if response.content:
                user_id = payload.get("user_id")
                await router.notify_user(
                    response.content,
                    payload.get("channel_id"),
                    user_id=str(user_id) if user_id else None,
                    key=f"agent-reply:{record.ext_id}:{event.id}",
                )

        return invoke


class LiveOrchestrator:
    """The router's orchestrator, rebuilt from the wired tools when wiring changes.

    A change only marks it stale; the next turn rebuilds once, so a turn costs
    one flag check and a burst of changes (kernel start) one rebuild.
    """

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._current: Any = None

    def invalidate(self) -> None:
        self._current = None

    @property
    def current(self) -> Any:
        if self._current is None:
            self._current = self._build()
        return self._current

    @property
    def tools(self) -> list[Any]:
        return list(self.current.tools)
