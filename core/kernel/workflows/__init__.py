"""Workflows: durable routines of several steps, per person (ADR 0091, docs/workflows.md)."""

from core.kernel.workflows.commands import workflow_commands, workflow_tools
from core.kernel.workflows.executor import Executor, Powers, StepFailedError
from core.kernel.workflows.powers import KernelPowers
from core.kernel.workflows.service import BACKGROUND, WorkflowError, Workflows
from core.kernel.workflows.store import LIVE, RunRow, WorkflowStore

__all__ = [
    "BACKGROUND",
    "LIVE",
    "Executor",
    "KernelPowers",
    "Powers",
    "RunRow",
    "StepFailedError",
    "WorkflowError",
    "WorkflowStore",
    "Workflows",
    "workflow_commands",
    "workflow_tools",
]
