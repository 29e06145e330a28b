"""Tools the kernel gives the orchestrator (SPEC §1 ``core/tools``)."""

from core.tools.clock import now_in, resolve_timezone, timezone_label
from core.tools.core_tools import build_core_tools

__all__ = ["build_core_tools", "now_in", "resolve_timezone", "timezone_label"]
