"""The turn pipeline's hooks (SPEC §9, docs/hooks.md): registry, calls, frames, points."""

from core.kernel.hooks.calls import SKIPPED, HookCaller
from core.kernel.hooks.command_hooks import CommandSpec, CommandTarget, command_hook_entries
from core.kernel.hooks.command_process import CommandHookError
from core.kernel.hooks.frames import FrameRecorder, FrameSink
from core.kernel.hooks.guardrails import TurnGuardrails, guardrail_reply
from core.kernel.hooks.pipeline import RenderedOutput, TurnHooks
from core.kernel.hooks.prompt_additions import (
    AppliedAdditions,
    PromptAdditions,
    StateReader,
    tool_guidance,
)
from core.kernel.hooks.registry import HookEntry, HookRegistry, TagPatterns
from core.kernel.hooks.tool_calls import (
    Admission,
    Admitted,
    Invoker,
    ToolInterceptor,
    ToolTap,
    is_intercepted,
)

__all__ = [
    "SKIPPED",
    "Admission",
    "Admitted",
    "AppliedAdditions",
    "CommandHookError",
    "CommandSpec",
    "CommandTarget",
    "FrameRecorder",
    "FrameSink",
    "HookCaller",
    "HookEntry",
    "HookRegistry",
    "Invoker",
    "PromptAdditions",
    "RenderedOutput",
    "StateReader",
    "TagPatterns",
    "ToolInterceptor",
    "ToolTap",
    "TurnGuardrails",
    "TurnHooks",
    "command_hook_entries",
    "guardrail_reply",
    "is_intercepted",
    "tool_guidance",
]
