"""Webhook: post-processor results to workflow tools, retried through the durable bus.

One bus subscription per configured target (its id names the URL), so the
bus tracks each delivery on its own: a receiver that fails is retried with
the bus's backoff without posting again to the ones that answered, and a
delivery that keeps failing becomes a dead letter naming the URL. The body
is the ``postprocess.completed`` event (activation name, processor, param,
turn and session ids, the clean query, the whole result) plus ``event_id``;
the ``Idempotency-Key`` header is the same on every retry of one event.

Redirects are not followed (ADR 0047): a ``3xx`` is a failed delivery naming
where the receiver points, so a target's headers (its ``Authorization``)
never go to a host the user did not configure, and a POST is never quietly
turned into a bodiless GET.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from core.extensions.contract import Event, ExtensionContext, PostProcessTopics
from core.extensions.sdk import BaseExtension

ALL = "*"


class WebhookError(Exception):
    """A receiver refused a result or could not be reached; the bus retries it."""


class WebhookConfigError(ValueError):
    """``extensions.webhook.targets`` is not a list of ``{url, names}``."""


@dataclass(frozen=True)
class Target:
    url: str
    names: frozenset[str]
    headers: dict[str, str] = field(default_factory=dict)

    def wants(self, name: object) -> bool:
        return ALL in self.names or name in self.names

    @property
    def key(self) -> str:
        """Stable per URL: the bus's subscriber id (and so its retries) follow it."""
        return hashlib.sha256(self.url.encode()).hexdigest()[:12]


class Webhook(BaseExtension):
    def __init__(self) -> None:
        self.targets: list[Target] = []
        self.timeout_s = 10.0

    async def initialize(self, context: ExtensionContext) -> None:
        await super().initialize(context)
        self.targets = parse_targets(context.get_config("targets") or [])
        self.timeout_s = float(context.get_config("timeout_s", 10))
        for target in self.targets:
            context.subscribe_event(PostProcessTopics.COMPLETED, self._poster(target))
        if not self.targets:
            context.logger.info("no targets configured; nothing is posted")

    def _poster(self, target: Target) -> Callable[[Event], Awaitable[None]]:
        async def post(event: Event) -> None:
            if not target.wants(event.payload.get("name")):
                return
            body = {"event_id": event.id, **event.payload}
            headers = {
                "Content-Type": "application/json",
                "Idempotency-Key": f"hearth-postprocess-{event.id}",
                **target.headers,
            }
            await asyncio.to_thread(_post, target.url, body, headers, self.timeout_s)

        post.__qualname__ = f"post_{target.key}"
        return post


def parse_targets(raw: Any) -> list[Target]:
    """The ``targets`` config; raises naming the entry and field that is wrong."""
    if not isinstance(raw, list):
        raise WebhookConfigError("extensions.webhook.targets must be a list")
    targets = []
    for index, entry in enumerate(raw):
        where = f"extensions.webhook.targets[{index}]"
        if not isinstance(entry, dict):
            raise WebhookConfigError(f"{where} must be a mapping with url and names")
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise WebhookConfigError(f"{where}.url must be an http(s) URL, got {url!r}")
        names = entry.get("names")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise WebhookConfigError(f'{where}.names must list activation names (or ["*"])')
        headers = entry.get("headers") or {}
        if not isinstance(headers, dict):
            raise WebhookConfigError(f"{where}.headers must be a mapping")
        clean = {n.lstrip("#").lower() for n in names}
        targets.append(Target(url, frozenset(clean), {str(k): str(v) for k, v in headers.items()}))
    return targets


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Every ``3xx`` stays an answer (an ``HTTPError``): nothing is sent to its
    ``Location``, with or without the target's headers."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def _post(url: str, body: dict[str, Any], headers: dict[str, str], timeout_s: float) -> None:
    data = json.dumps(body, default=str).encode()
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with _OPENER.open(request, timeout=timeout_s) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        moved = exc.headers.get("Location") if 300 <= exc.code < 400 else None
        where = (
            f" (redirects to {moved[:200]!r}, not followed: configure that URL)" if moved else ""
        )
        raise WebhookError(f"{url} answered {exc.code} {exc.reason}{where}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise WebhookError(f"{url} unreachable: {exc}") from None
    if not 200 <= status < 300:
        raise WebhookError(f"{url} answered {status}")
