"""Settings in one package: the pydantic models of ``settings.yaml``, its
sections, and how the layers (defaults, the tracked file, the user's local
file, ``--settings``, the environment) are read. Everything else imports
settings through this door.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.config.consent import (
        PolicyAction as PolicyAction,
        PolicyRule as PolicyRule,
        PolicySettings as PolicySettings,
        check_tool_name as check_tool_name,
    )
    from core.config.layers import (
        Layer as Layer,
        SettingsError as SettingsError,
        changed_keys as changed_keys,
        local_layer_path as local_layer_path,
        merge as merge,
        read_layer as read_layer,
        validated as validated,
    )
    from core.config.models import (
        BudgetSettings as BudgetSettings,
        FallbackRef as FallbackRef,
        LocalServerSettings as LocalServerSettings,
        ModelPrice as ModelPrice,
    )
    from core.config.people import (
        People as People,
        PersonSettings as PersonSettings,
        Role as Role,
    )
    from core.config.replay import ReplaySettings as ReplaySettings
    from core.config.scale import (
        KernelRole as KernelRole,
        KernelSettings as KernelSettings,
        ScaleOutSections as ScaleOutSections,
    )
    from core.config.sections import (
        DevSettings as DevSettings,
        FilesSettings as FilesSettings,
        MetricsSettings as MetricsSettings,
        StateSettings as StateSettings,
        ToolOverride as ToolOverride,
        ToolsSettings as ToolsSettings,
        WorkflowsSettings as WorkflowsSettings,
        listen_address as listen_address,
    )
    from core.config.settings import (
        CommandHook as CommandHook,
        EventsSettings as EventsSettings,
        HookPoint as HookPoint,
        HooksSettings as HooksSettings,
        IsolationSettings as IsolationSettings,
        LoaderSettings as LoaderSettings,
        McpServerSettings as McpServerSettings,
        McpSettings as McpSettings,
        ModelRef as ModelRef,
        ModelsSettings as ModelsSettings,
        PostProcessSettings as PostProcessSettings,
        ProviderSettings as ProviderSettings,
        Settings as Settings,
        SupervisorSettings as SupervisorSettings,
        TurnsSettings as TurnsSettings,
        load_settings as load_settings,
        non_defaults as non_defaults,
    )
    from core.config.skills import SkillsSettings as SkillsSettings
    from core.config.storage import StorageSettings as StorageSettings
    from core.runtime.datadir import PROJECT_ROOT as PROJECT_ROOT

__getattr__, __dir__ = lazy_door(__name__, globals())
