"""Topic names the kernel handles, and the one rule for matching patterns.

A topic is a non-empty string without whitespace or ``*``. A subscription
pattern is an exact topic, a prefix ending in ``.*`` (``reminder.*`` matches
``reminder.due`` and ``reminder.x.y`` but not ``reminder``), or ``*`` alone.
"""

from __future__ import annotations

import re

from core.events.errors import TopicError

__all__ = [
    "SystemTopics",
    "pattern_within",
    "topic_matches",
    "validate_pattern",
    "validate_topic",
]


_FORBIDDEN = re.compile(r"[\s*]")


class SystemTopics:
    """Topics with kernel handlers (SPEC §3). Use these constants, never the raw strings."""

    USER_MESSAGE = "user.message"
    USER_NOTIFY = "system.user.notify"
    AGENT_TASK = "system.agent.task"
    AGENT_BACKGROUND = "system.agent.background"
    REPLY = "system.reply"  # the kernel's reply outbox (ADR 0014)
    UI_ANSWER = "system.ui.answer"  # the user answered a question a channel showed (ADR 0021)
    TURN_RESUME = "system.turn.resume"  # a paused turn's questions are all answered (ADR 0021)
    KERNEL_RELOAD = "system.kernel.reload"  # `main.py extensions reload ID` asks (ADR 0032)
    KERNEL_RELOAD_RESULT = "system.kernel.reload.result"  # the running kernel answers
    TURN_CANCEL = "system.turn.cancel"  # the user stopped the turn being answered (Ctrl-C)
    TURN_CANCELLED = "turn.cancelled"  # the kernel's record that it stopped one (journal only)


def topic_matches(pattern: str, topic: str) -> bool:
    """Whether ``topic`` is delivered to a subscription on ``pattern``."""
    if pattern == "*":
        return True
    if pattern.endswith(".*"):
        return topic.startswith(pattern[:-1])
    return pattern == topic


def pattern_within(requested: str, allowed: str) -> bool:
    """Whether every topic the pattern ``requested`` can match is matched by ``allowed``.

    Used to check a subscription against a manifest's ``permissions.subscribe``.
    """
    if allowed == "*" or requested == allowed:
        return True
    if allowed.endswith(".*"):
        return requested.startswith(allowed[:-1])
    return False


def validate_topic(topic: str) -> str:
    """Return ``topic`` or raise ``TopicError`` saying what is wrong with it."""
    if not isinstance(topic, str) or not topic:
        raise TopicError(f"topic must be a non-empty string, got {topic!r}")
    if _FORBIDDEN.search(topic) is None:
        return topic
    if any(ch.isspace() for ch in topic):
        raise TopicError(f"topic {topic!r} contains whitespace")
    if "*" in topic:
        raise TopicError(f"topic {topic!r} contains '*'; wildcards are for subscribe() only")
    return topic


def validate_pattern(pattern: str) -> str:
    """Return ``pattern`` or raise ``TopicError``: exact topic, ``prefix.*`` or ``*``."""
    if pattern == "*":
        return pattern
    if isinstance(pattern, str) and pattern.endswith(".*") and len(pattern) > 2:
        prefix = pattern[:-2]
        if "*" not in prefix and not any(ch.isspace() for ch in prefix):
            return pattern
        raise TopicError(f"topic pattern {pattern!r}: only one trailing '.*' wildcard is allowed")
    try:
        return validate_topic(pattern)
    except TopicError as exc:
        raise TopicError(
            f"topic pattern {pattern!r} must be an exact topic, a prefix ending in '.*', or '*'"
        ) from exc
