"""Connect loaded extensions to the kernel: channels, commands, manifest
event subscriptions. Each function does one kind of wiring and logs what it
could not wire instead of failing the start."""

from __future__ import annotations

import json
import logging
from typing import Any

from core.events import EventBus
from core.events.models import Event
from core.extensions.contract import AgentInvocationContext, Command
from core.extensions.lifecycle import describe_exception
from core.extensions.loader import Loader
from core.extensions.records import ExtensionRecord
from core.kernel.commands import CommandRegistry
from core.kernel.router import MessageRouter, notify_target_user

log = logging.getLogger("core.kernel.wiring")


def wire_channels(loader: Loader, router: MessageRouter) -> None:
    for record in loader.active("ChannelProvider"):
        router.register_channel(record.ext_id, record.instance)


def wire_commands(loader: Loader, commands: CommandRegistry) -> None:
    for record in loader.active("CommandProvider"):
        try:
            provided: list[Command] = list(record.instance.get_commands())
        except Exception as exc:
            log.error("get_commands of %s failed: %s", record.ext_id, describe_exception(exc))
            continue
        for command in provided:
            commands.add(record.ext_id, command)


def wire_manifest_subscriptions(loader: Loader, bus: EventBus, router: MessageRouter) -> None:
    """``events.subscribes`` with ``notify_user`` / ``invoke_agent`` (``custom``
    is left to the extension)."""
    for record in loader.active():
        assert record.manifest is not None
        for sub in record.manifest.events.subscribes:
            subscriber_id = f"{record.ext_id}/{sub.topic}/{sub.handler}"
            if sub.handler == "notify_user":
                bus.subscribe(sub.topic, _notify_handler(router), subscriber_id)
            elif sub.handler == "invoke_agent":
                if "AgentProvider" not in record.capabilities:
                    log.error(
                        "%s: events.subscribes %s uses invoke_agent but it is not an agent",
                        record.ext_id,
                        sub.topic,
                    )
                    continue
                bus.subscribe(sub.topic, _agent_handler(record, router), subscriber_id)


def _notify_handler(router: MessageRouter) -> Any:
    async def notify(event: Event) -> None:
        text = event.payload.get("text")
        if text:
            payload = event.payload
            user_id = notify_target_user(payload)
            await router.notify_user(str(text), payload.get("channel_id"), user_id=user_id)

    return notify


def _agent_handler(record: ExtensionRecord, router: MessageRouter) -> Any:
    async def invoke(event: Event) -> None:
        payload = event.payload
        task = payload.get("prompt") or payload.get("text") or json.dumps(payload)
        context = AgentInvocationContext(correlation_id=event.correlation_id)
        response = await record.instance.invoke(str(task), context)
        if response.content:
            user_id = notify_target_user(payload)
            await router.notify_user(response.content, payload.get("channel_id"), user_id=user_id)

    return invoke
