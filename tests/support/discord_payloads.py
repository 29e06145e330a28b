"""Discord's JSON as the fake Discord (``fake_discord``) sends it: users, messages,
interactions, errors; and what it checks in what it is sent."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

BOT_ID = 900_000_000_000_000_001
APPLICATION_ID = 900_000_000_000_000_002
GUILD_ID = 700_000_000_000_000_001
MAX_CHARS = 2000


def user_json(user_id: int, *, bot: bool = False) -> dict[str, Any]:
    name = "hearth-bot" if bot else f"user{user_id}"
    return {
        "id": str(user_id),
        "username": name,
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
    }


def interaction_json(
    interaction_id: int,
    kind: int,
    channel_id: int,
    guild: bool,
    user_id: int,
    data: dict[str, Any],
    message: dict[str, Any],
) -> dict[str, Any]:
    """An ``INTERACTION_CREATE`` of ``kind`` (3: a component, 5: a form submitted)."""
    payload: dict[str, Any] = {
        "id": str(interaction_id),
        "application_id": str(APPLICATION_ID),
        "type": kind,
        "token": f"itoken-{interaction_id}",
        "version": 1,
        "channel_id": str(channel_id),
        "channel": {"id": str(channel_id), "type": 0 if guild else 1},
        "data": data,
        "message": message,
        "locale": "en-US",
        "app_permissions": "0",
        "entitlements": [],
        "authorizing_integration_owners": {},
        "attachment_size_limit": 10_485_760,
        "context": 0 if guild else 1,
    }
    if guild:
        payload["guild_id"] = str(GUILD_ID)
        payload["member"] = {
            "user": user_json(user_id),
            "roles": [],
            "joined_at": now(),
            "permissions": "0",
            "deaf": False,
            "mute": False,
            "flags": 0,
        }
    else:
        payload["user"] = user_json(user_id)
    return payload


def text_fields(component: Any) -> list[str]:
    """The custom ids of the text inputs (type 4) of a form, however nested."""
    if isinstance(component, list):
        return [f for c in component for f in text_fields(c)]
    if not isinstance(component, dict):
        return []
    if component.get("type") == 4:
        return [component["custom_id"]]
    return text_fields(component.get("components") or [component.get("component")])


def check_content(content: str, has_components: bool) -> web.Response | None:
    if len(content) > MAX_CHARS:
        return error(400, 50035, f"Invalid Form Body: content longer than {MAX_CHARS}")
    if not content.strip() and not has_components:
        return error(400, 50006, "Cannot send an empty message")
    return None


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """JSON as Discord sends it: discord.py parses a body only when the content type
    is exactly ``application/json`` (no charset)."""
    headers = {**(headers or {}), "Content-Type": "application/json"}
    return web.Response(body=json.dumps(data).encode(), status=status, headers=headers)


def error(status: int, code: int, message: str) -> web.Response:
    return json_response({"message": message, "code": code}, status=status)


def now() -> str:
    return datetime.now(UTC).isoformat()
