"""``manifest.yaml`` schema (seed 002 "Manifest Schema" plus Hearth's fields).

Every model forbids unknown keys: a misspelled key is an error naming the
file and the field, never a silently ignored setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from core.config import check_tool_name
from core.extensions.contract import ExtensionContext
from core.extensions.contract.permissions import declared_permissions
from core.extensions.loading.wasm_section import WasmSection
from core.extensions.loading.workflow_section import WorkflowDefinition, unique_workflows
from core.extensions.sdk import CronError, check_cron, resolve_zone
from core.runtime import RESERVED_IDS
from core.runtime.errors import HearthError

MANIFEST_FILE = "manifest.yaml"
# letters, digits, - and _, a letter first, at most 64 (seed 001; ADR 0025)
EXTENSION_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")  # manifest `id`
MAX_ID_LENGTH = 64
_ENTRYPOINT_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_SECRET_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ManifestError(HearthError):
    """A manifest could not be read or validated."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


# every boolean permission a context method declares (``@needs``), in declaration order
PERMISSION_FLAGS = declared_permissions(ExtensionContext)


def declared_flags(namespace: dict[str, Any]) -> None:
    """Give the class being defined a ``bool`` field per declared permission it does not
    spell out, defaulting as declared: a permission said beside its context method
    needs no line here (the ones spelled out are the names kernel code reads)."""
    annotations = namespace.setdefault("__annotations__", {})
    for permission in PERMISSION_FLAGS:
        if permission.key not in annotations:
            annotations[permission.key] = "bool"
            namespace[permission.key] = permission.default


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentLimits(_Strict):
    max_turns: int = Field(default=10, ge=1)
    max_tokens_per_invocation: int = Field(default=50_000, ge=1)
    time_budget_ms: int = Field(default=120_000, ge=1)


class AgentSection(_Strict):
    integration_mode: Literal["tool", "handoff"] = "tool"
    model: str | None = None
    instructions: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    uses_tools: list[str] = Field(default_factory=list)
    limits: AgentLimits = Field(default_factory=AgentLimits)


class Subscription(_Strict):
    topic: str
    handler: Literal["notify_user", "invoke_agent", "custom"]


class EventsSection(_Strict):
    publishes: list[str] = Field(default_factory=list)
    subscribes: list[Subscription] = Field(default_factory=list)


class ScheduleEntry(_Strict):
    name: str
    cron: str
    task: str | None = None
    timezone: str | None = None

    @field_validator("cron")
    @classmethod
    def _valid_cron(cls, value: str) -> str:
        try:
            check_cron(value)  # croniter is imported here, not with every manifest
        except CronError:
            raise ValueError(f"invalid cron expression {value!r}") from None
        return value

    @field_validator("timezone")
    @classmethod
    def _valid_timezone(cls, value: str | None) -> str | None:
        if value is not None:
            check_timezone(value)
        return value

    @property
    def task_name(self) -> str:
        return self.task or self.name


class Permissions(_Strict):
    """What an extension may do beyond its own data dir (SPEC §6).

    ``emit``, ``subscribe`` and ``network`` left out (``None``) take the
    defaults of the extension's isolation: see ``resolved``.
    """

    emit: list[str] | None = None
    subscribe: list[str] | None = None
    network: bool | None = None
    paths: list[str] = Field(default_factory=list)
    notify: bool = True
    user_messages: bool = False
    agent: bool = False
    control: bool = False
    status: bool = False  # read the kernel's status, events and dead letters (ADR 0024)
    # see or change turns: hooks, context providers, prompt additions, ui_request (ADR 0041)
    conversations: bool = False
    mcp_server: bool = False  # serve the person's tools to MCP clients (ADR 0059)
    declared_flags(vars())

    def resolved(self, ext_id: str, *, isolated: bool) -> ResolvedPermissions:
        """The permissions in force: an isolated extension that does not say gets
        only its own topic namespace (``<id>.*``) and no network (least privilege);
        an in-process one, which can do anything its code does anyway, keeps
        everything."""
        own = [f"{ext_id}.*"] if isolated else ["*"]
        return ResolvedPermissions(
            emit=tuple(own if self.emit is None else self.emit),
            subscribe=tuple(own if self.subscribe is None else self.subscribe),
            network=(not isolated) if self.network is None else self.network,
            paths=tuple(self.paths),
            **{p.key: getattr(self, p.key) for p in PERMISSION_FLAGS},
        )


@dataclass(frozen=True, slots=True)
class ResolvedPermissions:
    """``Permissions`` with the isolation's defaults filled in (what is enforced)."""

    emit: tuple[str, ...]
    subscribe: tuple[str, ...]
    network: bool
    paths: tuple[str, ...]
    notify: bool
    user_messages: bool
    agent: bool
    control: bool
    status: bool = False
    conversations: bool = False
    mcp_server: bool = False
    declared_flags(vars())


class SecretSpec(_Strict):
    """One secret the extension reads (``secrets:`` entry).

    Written as a bare name (required) or ``{name: X, optional: true}``. A
    missing required secret leaves the extension ``skipped`` ("missing secret
    X") before any of its code runs; a missing optional one is ``None`` from
    ``get_secret`` and the extension decides what to do without it.
    """

    name: str
    optional: bool = False

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        if not _SECRET_RE.match(value):
            raise ValueError(f"{value!r} is not an environment variable name (letters, digits, _)")
        return value


class StateEquals(_Strict):
    key: str = Field(min_length=1)
    equals: Any


class Condition(_Strict):
    """When a prompt addition applies; exactly one kind, evaluated per turn.

    ``tag_present``: the turn's input holds ``<NAME>`` or ``<NAME …>``;
    ``state_value``: this extension's state ``key`` for the session equals
    ``equals``; ``context_match``: the input text matches the regular expression.
    """

    tag_present: str | None = Field(default=None, min_length=1)
    state_value: StateEquals | None = None
    context_match: str | None = None

    @field_validator("context_match")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression {value!r}: {exc}") from None
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Condition:
        given = [k for k in ("tag_present", "state_value", "context_match") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "needs exactly one of tag_present, state_value, context_match"
                + (f" (got {', '.join(given)})" if given else "")
            )
        return self


class PromptAddition(_Strict):
    """Text added to every turn's prompt (seed 001 "Prompt Wiring"), maybe conditionally."""

    position: Literal["system_prefix", "system_suffix", "user_prefix", "user_suffix"]
    content: str = Field(min_length=1)
    condition: Condition | None = None


class ToolConfig(_Strict):
    """Guidance on tools (seed 001 "Tool Sequencing"): rendered into the
    instructions, never enforced. Names are checked against the tools at start."""

    preferred_tools: list[str] = Field(default_factory=list)
    avoided_tools: list[str] = Field(default_factory=list)
    tool_order: list[str] = Field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [*self.preferred_tools, *self.avoided_tools, *self.tool_order]

    @property
    def empty(self) -> bool:
        return not self.names


ToolEffect = Literal["read_only", "additive", "destructive"]


class ToolDeclaration(_Strict):
    """What the manifest says about one of the extension's own tools (``tools.<name>``).

    ``side_effects``: whether a call acts outside Hearth's own data or cannot
    be undone (consent, docs/consent.md); it beats the tool's own attribute
    and the manifest's ``side_effects`` default. ``effect``: what a call does to
    the data it reaches — ``read_only`` (changes nothing), ``additive`` (adds,
    never changes or removes) or ``destructive`` (removes or overwrites; the
    default) — from which an MCP client's ``readOnlyHint`` and
    ``destructiveHint`` are derived (ADR 0074). A name the extension does not
    provide is a load error (ADR 0044): a manifest speaks for its own tools only.
    """

    side_effects: bool | None = None
    effect: ToolEffect | None = None


class Manifest(_Strict):
    id: str
    name: str
    entrypoint: str | None = None
    agent: AgentSection | None = None
    version: str = "1.0.0"
    description: str = ""
    setup_instructions: str = ""
    depends_on: list[str] = Field(default_factory=list)
    secrets: list[SecretSpec] = Field(default_factory=list)
    config: dict[str, Any] = Field(default_factory=dict)
    enabled: bool = True
    agent_id: str | None = None
    agent_config: dict[str, Any] | None = None
    events: EventsSection = Field(default_factory=EventsSection)
    schedules: list[ScheduleEntry] = Field(default_factory=list)
    # routines of several steps the kernel runs durably (ADR 0091, docs/workflows.md)
    workflows: list[WorkflowDefinition] = Field(default_factory=list)
    isolation: Literal["inprocess", "process", "wasm"] | None = None
    # the module of `isolation: wasm` and its budgets (ADR 0085); naming one means wasm
    wasm: WasmSection | None = None
    # the host ABI versions it works with, e.g. ">=1,<2"; refused at load otherwise
    requires_abi: str | None = None
    permissions: Permissions = Field(default_factory=Permissions)
    priority: int = Field(default=50, ge=0, le=100)
    prompt_additions: list[PromptAddition] = Field(default_factory=list)
    tool_config: ToolConfig = Field(default_factory=ToolConfig)
    # consent: the default for this extension's tools and agent (None: side-effecting
    # unless a tool says otherwise), and per-tool declarations
    side_effects: bool | None = None
    tools: dict[str, ToolDeclaration] = Field(default_factory=dict)
    # a bundled extension's group of Hearth's optional dependencies (pyproject.toml):
    # without it installed the extension is skipped with how to install it (ADR 0077)
    optional_group: str | None = None

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        if not EXTENSION_ID_RE.match(value):
            raise ValueError(
                f"{value!r} must start with a letter and hold only letters, digits, - and _ "
                f"(at most {MAX_ID_LENGTH} characters)"
            )
        if value.lower() in RESERVED_IDS:
            raise ValueError(
                f"{value!r} is reserved for the kernel's own files in paths.data; "
                "choose another id (and directory name)"
            )
        return value

    @field_validator("tools")
    @classmethod
    def _tool_names(cls, value: dict[str, ToolDeclaration]) -> dict[str, ToolDeclaration]:
        for name in value:
            check_tool_name(name)
        return value

    @field_validator("secrets", mode="before")
    @classmethod
    def _secret_names_as_specs(cls, value: Any) -> Any:
        """A bare name is a required secret: ``TOKEN`` means ``{name: TOKEN}``."""
        if isinstance(value, list):
            return [{"name": item} if isinstance(item, str) else item for item in value]
        return value

    @field_validator("secrets")
    @classmethod
    def _unique_secrets(cls, value: list[SecretSpec]) -> list[SecretSpec]:
        names = [spec.name for spec in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed more than once")
        return value

    _unique_workflows = field_validator("workflows")(unique_workflows)

    @field_validator("requires_abi")
    @classmethod
    def _valid_abi_specifier(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                if not str(SpecifierSet(value)):
                    raise InvalidSpecifier(value)
            except InvalidSpecifier:
                raise ValueError(
                    f'{value!r} is not a version specifier such as ">=1,<2" or "==1"'
                ) from None
        return value

    @model_validator(mode="before")
    @classmethod
    def _wasm_module_means_wasm(cls, data: Any) -> Any:
        """A manifest naming a module (``wasm:``) without ``isolation`` runs it as wasm."""
        if isinstance(data, dict) and data.get("wasm") is not None and "isolation" not in data:
            return {**data, "isolation": "wasm"}
        return data

    @model_validator(mode="after")
    def _wasm_consistent(self) -> Manifest:
        if self.isolation != "wasm":
            if self.wasm is not None:
                raise ValueError(
                    f"wasm: a module runs only with `isolation: wasm`, not {self.isolation}"
                )
            return self
        if self.wasm is None:
            raise ValueError("isolation: wasm needs a `wasm:` section naming its module")
        if self.entrypoint is not None or self.agent is not None:
            raise ValueError("isolation: wasm runs its module: drop `entrypoint` and `agent`")
        if self.permissions.network or self.permissions.paths:
            raise ValueError(
                "permissions: a wasm extension has no network or file access "
                "(host ABI 1 offers no such import); drop `network` and `paths`"
            )
        return self

    @field_validator("entrypoint")
    @classmethod
    def _valid_entrypoint(cls, value: str | None) -> str | None:
        if value is not None and not _ENTRYPOINT_RE.match(value):
            raise ValueError(f"{value!r} is not of the form module:ClassName")
        return value

    @model_validator(mode="after")
    def _prompt_additions_declared(self) -> Manifest:
        """Prompt additions write into every turn: a permission the user is asked for."""
        if self.prompt_additions and not self.permissions.conversations:
            raise ValueError(
                "prompt_additions change your conversations: declare `conversations: true` "
                "under `permissions:` (the user is then asked to grant it)"
            )
        return self

    @model_validator(mode="after")
    def _entrypoint_or_agent(self) -> Manifest:
        if self.entrypoint is None and self.agent is None and self.wasm is None:
            raise ValueError(
                "needs `entrypoint` (module:Class) or an `agent` section "
                "(or a `wasm` section naming its module)"
            )
        if self.id in self.depends_on:
            raise ValueError(f"depends_on: {self.id!r} depends on itself")
        return self

    @property
    def resolved_agent_id(self) -> str:
        return self.agent_id or self.id

    @property
    def secret_names(self) -> tuple[str, ...]:
        """Every secret it may read, required or optional (what ``get_secret`` allows)."""
        return tuple(spec.name for spec in self.secrets)

    @property
    def required_secrets(self) -> tuple[str, ...]:
        """The secrets it cannot run without."""
        return tuple(spec.name for spec in self.secrets if not spec.optional)


def abi_refusal(manifest: Manifest, host_abi: int) -> str | None:
    """Why the extension cannot run on a host of ABI ``host_abi`` (its ``requires_abi``
    excludes it), naming the extension, its requirement and the host's version;
    None: it can (or it does not say)."""
    if manifest.requires_abi is None or SpecifierSet(manifest.requires_abi).contains(str(host_abi)):
        return None
    return (
        f"extension {manifest.id!r} requires host ABI {manifest.requires_abi} "
        f"(requires_abi in its manifest), but this host speaks ABI {host_abi}: "
        "install a version of the extension written for it"
    )


def check_timezone(name: str) -> None:
    """Raise ``ValueError`` unless ``name`` is ``local`` or a known IANA zone."""
    resolve_zone(name)


def load_manifest(ext_dir: Path, content: bytes | None = None) -> Manifest:
    """Read and validate ``<ext_dir>/manifest.yaml``; the id must match the directory.

    ``content``: the file's bytes as already read (the ones its code digest was
    taken from, ADR 0073), instead of reading the file again.
    """
    path = ext_dir / MANIFEST_FILE
    try:
        text = path.read_text(encoding="utf-8") if content is None else content.decode()
        raw = yaml.safe_load(text)
    except OSError as exc:
        raise ManifestError(path, f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ManifestError(path, f"not UTF-8 text: {exc.reason}") from exc
    except yaml.YAMLError as exc:
        raise ManifestError(path, f"not valid YAML: {_one_line(exc)}") from exc
    if not isinstance(raw, dict):
        raise ManifestError(path, f"top level must be a mapping, got {type(raw).__name__}")
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as exc:
        raise ManifestError(path, describe_validation_error(exc)) from exc
    if manifest.id != ext_dir.name:
        raise ManifestError(
            path, f"id: {manifest.id!r} does not match the directory name {ext_dir.name!r}"
        )
    return manifest


def describe_validation_error(exc: ValidationError) -> str:
    """One line per pydantic error: ``field.path: message (got value)``."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] not in ("missing", "value_error") and not isinstance(
            err.get("input"), dict
        ):
            msg = f"{msg} (got {err['input']!r})"
        parts.append(f"{where}: {msg}")
    return "; ".join(parts)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
