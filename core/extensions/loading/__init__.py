"""Extensions from directory to running: manifests, what they may declare, the
code digest, import, dependency order, protocol detection and signature checks,
lifecycle deadlines, records, name keeping and tool stacking, and supervision.

The door is lazy (``lazy_door``): a submodule is imported when one of its
names is first used, so importing one part never loads the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.runtime.lazy_door import lazy_door

if TYPE_CHECKING:
    from core.extensions.loading.capabilities import (
        HOOKS as HOOKS,
        PERMISSIONS as PERMISSIONS,
        PROTOCOLS as PROTOCOLS,
        Capability as Capability,
        CapabilityError as CapabilityError,
        detect_capabilities as detect_capabilities,
        require_permissions as require_permissions,
    )
    from core.extensions.loading.code_digest import (
        CodeFile as CodeFile,
        CodeFiles as CodeFiles,
        CodeLinkError as CodeLinkError,
        code_digest as code_digest,
        read_code as read_code,
    )
    from core.extensions.loading.code_snapshot import CodeSnapshots as CodeSnapshots
    from core.extensions.loading.declarations import (
        check_tool_declarations as check_tool_declarations,
        provided_tool_names as provided_tool_names,
    )
    from core.extensions.loading.importer import (
        import_entrypoint as import_entrypoint,
        imported_modules as imported_modules,
        restore_modules as restore_modules,
    )
    from core.extensions.loading.lifecycle import (
        call_with_timeout as call_with_timeout,
        describe_exception as describe_exception,
        failure_reason as failure_reason,
    )
    from core.extensions.loading.loader import (
        InstanceFactory as InstanceFactory,
        Loader as Loader,
    )
    from core.extensions.loading.manifest import (
        EXTENSION_ID_RE as EXTENSION_ID_RE,
        MANIFEST_FILE as MANIFEST_FILE,
        AgentSection as AgentSection,
        Condition as Condition,
        Manifest as Manifest,
        ManifestError as ManifestError,
        PromptAddition as PromptAddition,
        ResolvedPermissions as ResolvedPermissions,
        ToolConfig as ToolConfig,
        ToolEffect as ToolEffect,
        load_manifest as load_manifest,
    )
    from core.extensions.loading.names import NamePolicy as NamePolicy
    from core.extensions.loading.records import (
        ExtensionRecord as ExtensionRecord,
        ExtensionStatus as ExtensionStatus,
    )
    from core.extensions.loading.setup_schema import (
        ANSWER_ATTEMPTS as ANSWER_ATTEMPTS,
        SetupField as SetupField,
        SetupSchemaError as SetupSchemaError,
        run_setup as run_setup,
    )
    from core.extensions.loading.signatures import (
        SignatureError as SignatureError,
        check_signatures as check_signatures,
    )
    from core.extensions.loading.stacking import (
        NameStack as NameStack,
        stack_names as stack_names,
    )
    from core.extensions.loading.supervision import ExtensionSupervisor as ExtensionSupervisor

__getattr__, __dir__ = lazy_door(__name__, globals())
