"""Settings in one package: the pydantic models of ``settings.yaml``, its
sections, and how the layers (defaults, the tracked file, the user's local
file, ``--settings``, the environment) are read. Everything else imports
settings through this door.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.config.consent import PolicyAction, PolicyRule, PolicySettings, check_tool_name
    from core.config.layers import (
        Layer,
        SettingsError,
        changed_keys,
        local_layer_path,
        merge,
        read_layer,
        validated,
    )
    from core.config.models import BudgetSettings, FallbackRef, ModelPrice
    from core.config.people import People, PersonSettings, Role
    from core.config.replay import ReplaySettings
    from core.config.scale import KernelRole, ScaleOutSections
    from core.config.sections import (
        DevSettings,
        MetricsSettings,
        StateSettings,
        ToolOverride,
        ToolsSettings,
        listen_address,
    )
    from core.config.settings import (
        PROJECT_ROOT,
        CommandHook,
        EventsSettings,
        HookPoint,
        HooksSettings,
        McpServerSettings,
        McpSettings,
        ModelRef,
        ModelsSettings,
        PostProcessSettings,
        ProviderSettings,
        Settings,
        SupervisorSettings,
        TurnsSettings,
        load_settings,
        non_defaults,
    )
    from core.config.skills import SkillsSettings
    from core.config.storage import StorageSettings

__all__ = [
    "PROJECT_ROOT",
    "BudgetSettings",
    "CommandHook",
    "DevSettings",
    "EventsSettings",
    "FallbackRef",
    "HookPoint",
    "HooksSettings",
    "KernelRole",
    "Layer",
    "McpServerSettings",
    "McpSettings",
    "MetricsSettings",
    "ModelPrice",
    "ModelRef",
    "ModelsSettings",
    "People",
    "PersonSettings",
    "PolicyAction",
    "PolicyRule",
    "PolicySettings",
    "PostProcessSettings",
    "ProviderSettings",
    "ReplaySettings",
    "Role",
    "ScaleOutSections",
    "Settings",
    "SettingsError",
    "SkillsSettings",
    "StateSettings",
    "StorageSettings",
    "SupervisorSettings",
    "ToolOverride",
    "ToolsSettings",
    "TurnsSettings",
    "changed_keys",
    "check_tool_name",
    "listen_address",
    "load_settings",
    "local_layer_path",
    "merge",
    "non_defaults",
    "read_layer",
    "validated",
]

_HOMES = {
    "BudgetSettings": "models",
    "FallbackRef": "models",
    "ModelPrice": "models",
    "ModelRef": "settings",
    "CommandHook": "settings",
    "DevSettings": "sections",
    "EventsSettings": "settings",
    "HookPoint": "settings",
    "HooksSettings": "settings",
    "KernelRole": "scale",
    "Layer": "layers",
    "McpServerSettings": "settings",
    "McpSettings": "settings",
    "MetricsSettings": "sections",
    "ModelsSettings": "settings",
    "PROJECT_ROOT": "settings",
    "People": "people",
    "PersonSettings": "people",
    "PolicyAction": "consent",
    "PolicyRule": "consent",
    "PolicySettings": "consent",
    "PostProcessSettings": "settings",
    "ProviderSettings": "settings",
    "ReplaySettings": "replay",
    "Role": "people",
    "ScaleOutSections": "scale",
    "Settings": "settings",
    "SettingsError": "layers",
    "SkillsSettings": "skills",
    "StateSettings": "sections",
    "StorageSettings": "storage",
    "SupervisorSettings": "settings",
    "ToolOverride": "sections",
    "ToolsSettings": "sections",
    "TurnsSettings": "settings",
    "changed_keys": "layers",
    "check_tool_name": "consent",
    "listen_address": "sections",
    "load_settings": "settings",
    "local_layer_path": "layers",
    "merge": "layers",
    "non_defaults": "settings",
    "read_layer": "layers",
    "validated": "layers",
}

__getattr__, __dir__ = lazy_door("core.config", globals(), _HOMES, __all__)
