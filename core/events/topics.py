"""Topic names the kernel handles, and the one rule for matching patterns.

A topic is a non-empty string without whitespace or ``*``. A subscription
pattern is an exact topic, a prefix ending in ``.*`` (``reminder.*`` matches
``reminder.due`` and ``reminder.x.y`` but not ``reminder``), or ``*`` alone.
"""

from __future__ import annotations

import re

from core.events.errors import TopicError

__all__ = [
    "PostProcessTopics",
    "RecordTopics",
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
    PREFIX = "system."  # every topic of the kernel's own; no extension's event
    KERNEL_PREFIX = "system.kernel."  # kernel control: the user's, never an extension's
    KERNEL_RELOAD = "system.kernel.reload"  # `main.py extensions reload ID` asks (ADR 0032)
    KERNEL_RELOAD_RESULT = "system.kernel.reload.result"  # the running kernel answers
    KERNEL_MCP_REQUEST = "system.kernel.mcp.request"  # `main.py mcp` asks (ADR 0059)
    KERNEL_MCP_RESPONSE = "system.kernel.mcp.response"  # the running kernel answers
    TURN_CANCEL = "system.turn.cancel"  # the user stopped the turn being answered (Ctrl-C)
    TURN_CANCELLED = "turn.cancelled"  # the kernel's record that it stopped one (journal only)
    SCHEDULE_FIRE = "system.schedule.fire"  # a manifest schedule is due (the kernel's timer)


class RecordTopics:
    """The kernel's own records in the journal: hook frames (``hook.<kind>``, ADR 0019)
    and a conversation's replay records (ADR 0033). Only the kernel publishes them
    (``core.extensions.access.topic_rules``); a replay trusts them."""

    HOOK_PREFIX = "hook."
    HOOK_APPROVAL = "hook.approval"  # consent's frame: a tool call asked about, answered
    REPLAY_PREFIX = "replay."
    REPLAY_TURN = "replay.turn"  # a turn, once over: the text as the user sent it, its calls
    REPLAY_CALLS = "replay.calls"  # the calls of a paused turn after it was resumed
    REPLAY_MODEL = "replay.model"  # one model call: request and response (in a turn's calls)
    REPLAY_TOOL = "replay.tool"  # one tool call as the tool saw it, and its result
    REPLAY_RUN = "replay.run"  # a workflow run's start: definition, input, person (ADR 0091)
    REPLAY_STEP = "replay.step"  # one step outcome of a workflow run, with its calls
    REPLAY_BLOB = "replay.blob"  # a large payload, stored once and referenced


class PostProcessTopics:
    """Where the kernel journals post-processing (source ``kernel``, correlation id =
    turn id). Extensions may subscribe (a webhook) but never publish on them.

    ``started``: ``{turn_id, session_id, channel_id, user_id, query, name,
    processor, param}``; ``completed``: the same plus ``success`` and
    ``result`` (``PostProcessResult.to_dict()``); ``results``: once per turn,
    ``{turn_id, …, results: {name: result}, usage}``.
    """

    PREFIX = "postprocess."
    STARTED = "postprocess.started"
    COMPLETED = "postprocess.completed"
    RESULTS = "postprocess.results"


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
