"""``/approve ID [always]``, ``/deny ID`` and ``/policy`` (SPEC §10, docs/consent.md).

``/approve`` and ``/deny`` answer a question from any channel without
buttons; without an id they answer the conversation's only open question.
``/policy`` shows the profile, the rules, the "always allow" answers and the
effective action of every tool on the channel it is asked from;
``/policy revoke TOOL`` forgets an "always allow". ``/answer ID TEXT`` answers
an extension's question (``confirm``, ``select``, ``input``) in words.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

from core.extensions.contract import Command, TurnContext
from core.kernel.commands.table import NOT_OWNER
from core.kernel.consent.desk import ApprovalDesk
from core.kernel.consent.policy import ConsentPolicy, ToolInfo
from core.kernel.consent.responder import Responder
from core.kernel.consent.ui import UiRequests
from core.kernel.consent.wording import Choice
from core.kernel.conversations.sessions import Conversations

__all__ = ["consent_commands", "policy_summary"]

ListTools = Callable[[], Awaitable[Sequence[ToolInfo]]]
_PROFILES = {
    "safe": "tools with side effects ask first, the rest run",
    "full_auto": "every tool runs without asking",
}


def consent_commands(
    desk: ApprovalDesk, policy: ConsentPolicy, list_tools: ListTools, ui: UiRequests
) -> list[Command]:
    """The consent commands, bound to the kernel's desk, policy, tool list and the
    extensions' open questions (``/answer``)."""

    async def answer(args: str, turn: TurnContext, choice: Choice) -> str:
        parts = args.split()
        responder = Responder(turn.channel_id or "", turn.user_id or "", turn.sender_id)
        if len(parts) == 2 and parts[1].lower() == "show":  # the whole call, not an answer
            await desk.sync(approval_id=parts[0])
            return desk.show(parts[0], responder)
        if parts:
            if len(parts) > 1 and parts[1].lower() == "always" and choice != "deny":
                choice = "always"
            return await desk.answer(parts[0], choice, responder)
        conversation = Conversations.key(responder.channel_id, responder.user_id)
        await desk.sync(conversation=conversation)
        pending = desk.pending_in(conversation)
        if len(pending) == 1:
            return await desk.answer(pending[0].id, choice, responder)
        if not pending:
            return "There is no open question here."
        ids = ", ".join(approval.id for approval in pending)
        return f"Several questions are open ({ids}): name one, e.g. /approve {pending[0].id}."

    async def approve(args: str, turn: TurnContext) -> str:
        return await answer(args, turn, "once")

    async def deny(args: str, turn: TurnContext) -> str:
        return await answer(args, turn, "deny")

    async def policy_(args: str, turn: TurnContext) -> str:
        parts = args.split()
        if parts[:1] == ["revoke"]:
            if turn.role != "owner":
                return NOT_OWNER.format(name="policy revoke")
            if len(parts) != 2:
                return "Usage: /policy revoke TOOL"
            if await desk.revoke(parts[1]):
                return f"{parts[1]} is no longer always allowed; it asks again."
            return f"{parts[1]} was not always allowed."
        return _policy_text(policy, desk, await list_tools(), turn)

    async def answer_(args: str, turn: TurnContext) -> str:
        request_id, _, text = args.strip().partition(" ")
        if not request_id:
            return "Usage: /answer ID YOUR ANSWER"
        responder = Responder(turn.channel_id or "", turn.user_id or "", turn.sender_id)
        return await ui.answer(request_id, text, responder)

    return [
        Command("answer", "answer a question an extension asked: /answer ID TEXT", answer_),
        Command(
            "approve",
            "allow a tool call that waits: /approve ID [always]; /approve ID show: the whole call",
            approve,
        ),
        Command("deny", "refuse a tool call that waits: /deny ID", deny),
        Command("policy", "which tools run, ask or are denied here; /policy revoke TOOL", policy_),
    ]


def policy_summary(policy: ConsentPolicy, desk: ApprovalDesk) -> str:
    """One line for ``/status``."""
    return (
        f"Consent: profile {policy.profile}, {len(policy.rules)} rule(s), "
        f"{len(desk.grants())} always allowed, {desk.open_count()} question(s) waiting"
    )


def _policy_text(
    policy: ConsentPolicy, desk: ApprovalDesk, tools: Sequence[ToolInfo], turn: TurnContext
) -> str:
    """The owner sees every person's "always" answers; a member only their own."""
    channel, person = turn.channel_id, turn.person_key
    lines = [f"Profile: {policy.profile} ({_PROFILES[policy.profile]})"]
    if policy.rules:
        lines.append("Rules (settings policy.rules; the most specific wins):")
        for index, rule in enumerate(policy.rules, 1):
            where = f" on {rule.channel}" if rule.channel else ""
            lines.append(f"  {index}. {rule.tool}{where}: {rule.action}")
    grants = desk.grants() if turn.role == "owner" else desk.grants_of(person)
    if grants:
        lines.append("Always allowed (answers; /policy revoke TOOL to undo):")
        for grant in grants:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(grant.created_at))
            whose = "" if grant.person is None else f" (for {grant.person})"
            lines.append(f"  {grant.tool}{whose} — by {grant.granted_by}, {when}")
    lines.append(f"Tools here ({channel or 'no channel'}):")
    for tool in sorted(tools, key=lambda t: t.name):
        verdict = policy.decide(tool, channel, person)
        lines.append(f"  {tool.name}: {verdict.action} — {verdict.reason}")
    return "\n".join(lines)
