"""Consent (SPEC §9–10, ADR 0021): side effects, policy, approvals that survive restarts."""

from core.kernel.consent.catalog import CORE_SOURCE, DeclaredTools, ToolCatalog, mcp_side_effects
from core.kernel.consent.commands import consent_commands, policy_summary
from core.kernel.consent.desk import ApprovalDesk
from core.kernel.consent.flow import ApprovalFlow
from core.kernel.consent.gate import APPROVAL_FRAME, AskedCall, ConsentGate, FullAutoGate
from core.kernel.consent.policy import ConsentPolicy, Grant, ToolInfo, Verdict
from core.kernel.consent.responder import Responder
from core.kernel.consent.store import Approval, ApprovalStore, PausedTurn
from core.kernel.consent.ui import UiRequests
from core.kernel.consent.wording import describe_call, parse_answer, question_text

__all__ = [
    "APPROVAL_FRAME",
    "CORE_SOURCE",
    "Approval",
    "ApprovalDesk",
    "ApprovalFlow",
    "ApprovalStore",
    "AskedCall",
    "ConsentGate",
    "ConsentPolicy",
    "DeclaredTools",
    "FullAutoGate",
    "Grant",
    "PausedTurn",
    "Responder",
    "ToolCatalog",
    "ToolInfo",
    "UiRequests",
    "Verdict",
    "consent_commands",
    "describe_call",
    "mcp_side_effects",
    "parse_answer",
    "policy_summary",
    "question_text",
]
