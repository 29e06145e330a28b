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
        HOOKS,
        PERMISSIONS,
        PROTOCOLS,
        Capability,
        CapabilityError,
        detect_capabilities,
        require_permissions,
    )
    from core.extensions.loading.code_digest import (
        CodeFile,
        CodeFiles,
        CodeLinkError,
        code_digest,
        read_code,
    )
    from core.extensions.loading.code_snapshot import CodeSnapshots
    from core.extensions.loading.declarations import check_tool_declarations, provided_tool_names
    from core.extensions.loading.importer import (
        import_entrypoint,
        imported_modules,
        restore_modules,
    )
    from core.extensions.loading.lifecycle import (
        call_with_timeout,
        describe_exception,
        failure_reason,
    )
    from core.extensions.loading.loader import InstanceFactory, Loader
    from core.extensions.loading.manifest import (
        EXTENSION_ID_RE,
        MANIFEST_FILE,
        AgentSection,
        Condition,
        Manifest,
        ManifestError,
        PromptAddition,
        ResolvedPermissions,
        ToolConfig,
        ToolEffect,
        load_manifest,
    )
    from core.extensions.loading.names import NamePolicy
    from core.extensions.loading.records import ExtensionRecord, ExtensionStatus
    from core.extensions.loading.setup_schema import (
        ANSWER_ATTEMPTS,
        SetupField,
        SetupSchemaError,
        run_setup,
    )
    from core.extensions.loading.signatures import SignatureError, check_signatures
    from core.extensions.loading.stacking import NameStack, stack_names
    from core.extensions.loading.supervision import ExtensionSupervisor

__all__ = [
    "ANSWER_ATTEMPTS",
    "EXTENSION_ID_RE",
    "HOOKS",
    "MANIFEST_FILE",
    "PERMISSIONS",
    "PROTOCOLS",
    "AgentSection",
    "Capability",
    "CapabilityError",
    "CodeFile",
    "CodeFiles",
    "CodeLinkError",
    "CodeSnapshots",
    "Condition",
    "ExtensionRecord",
    "ExtensionStatus",
    "ExtensionSupervisor",
    "InstanceFactory",
    "Loader",
    "Manifest",
    "ManifestError",
    "NamePolicy",
    "NameStack",
    "PromptAddition",
    "ResolvedPermissions",
    "SetupField",
    "SetupSchemaError",
    "SignatureError",
    "ToolConfig",
    "ToolEffect",
    "call_with_timeout",
    "check_signatures",
    "check_tool_declarations",
    "code_digest",
    "describe_exception",
    "detect_capabilities",
    "failure_reason",
    "import_entrypoint",
    "imported_modules",
    "load_manifest",
    "provided_tool_names",
    "read_code",
    "require_permissions",
    "restore_modules",
    "run_setup",
    "stack_names",
]

_HOMES = {
    "ANSWER_ATTEMPTS": "setup_schema",
    "AgentSection": "manifest",
    "Capability": "capabilities",
    "CapabilityError": "capabilities",
    "Condition": "manifest",
    "EXTENSION_ID_RE": "manifest",
    "ExtensionRecord": "records",
    "ExtensionStatus": "records",
    "ExtensionSupervisor": "supervision",
    "HOOKS": "capabilities",
    "InstanceFactory": "loader",
    "Loader": "loader",
    "MANIFEST_FILE": "manifest",
    "Manifest": "manifest",
    "ManifestError": "manifest",
    "NamePolicy": "names",
    "NameStack": "stacking",
    "PERMISSIONS": "capabilities",
    "PROTOCOLS": "capabilities",
    "PromptAddition": "manifest",
    "ResolvedPermissions": "manifest",
    "SetupField": "setup_schema",
    "SetupSchemaError": "setup_schema",
    "SignatureError": "signatures",
    "ToolConfig": "manifest",
    "ToolEffect": "manifest",
    "call_with_timeout": "lifecycle",
    "check_signatures": "signatures",
    "check_tool_declarations": "declarations",
    "CodeFile": "code_digest",
    "CodeFiles": "code_digest",
    "CodeLinkError": "code_digest",
    "CodeSnapshots": "code_snapshot",
    "code_digest": "code_digest",
    "read_code": "code_digest",
    "describe_exception": "lifecycle",
    "detect_capabilities": "capabilities",
    "failure_reason": "lifecycle",
    "import_entrypoint": "importer",
    "imported_modules": "importer",
    "load_manifest": "manifest",
    "provided_tool_names": "declarations",
    "require_permissions": "capabilities",
    "restore_modules": "importer",
    "run_setup": "setup_schema",
    "stack_names": "stacking",
}

__getattr__, __dir__ = lazy_door("core.extensions.loading", globals(), _HOMES, __all__)
