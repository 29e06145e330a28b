"""Settings: ``settings.yaml`` validated by pydantic, overridable from the env.

Precedence (highest first, ADR 0045): ``HEARTH__SECTION__KEY`` environment
variables, the base file's local layer (``settings.local.yaml``, git-ignored:
the user's and ``setup``'s choices), the base file (the YAML file given with
``--settings``, or the project's tracked ``settings.yaml``), the defaults below
(``core.config.layers``). Every model forbids unknown keys so a typo in a file
is an error that names the file and the key, not a silently ignored setting.
"""

from __future__ import annotations

import re
import shlex
from ipaddress import ip_address
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from core.config.consent import PolicySettings
from core.config.env_values import YamlValuedEnv
from core.config.layers import (
    Layer,
    SettingsError as SettingsError,  # its home for every caller
    changed_keys,
    local_layer_path,
    read_layer,
    validated,
)
from core.config.models import BudgetSettings, FallbackRef, LocalServerSettings, ModelPrice
from core.config.people import People
from core.config.replay import ReplaySettings
from core.config.scale import ScaleOutSections
from core.config.sections import (
    DevSettings,
    FilesSettings,
    MetricsSettings,
    StateSettings,
    ToolsSettings,
    WorkflowsSettings,
)
from core.config.skills import SkillsSettings
from core.extensions.contract.hook_specs import HOOK_SPECS
from core.runtime.datadir import PROJECT_ROOT

DEFAULT_SETTINGS_FILE = PROJECT_ROOT / "settings.yaml"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PathsSettings(_Section):
    extensions: Path = Path("sandbox/extensions")
    data: Path = Path("sandbox/data")


class LoggingSettings(_Section):
    level: str = "INFO"
    format: Literal["text", "json"] = "text"


class ModelRef(_Section):
    provider: str
    model: str
    fallbacks: list[FallbackRef] = Field(default_factory=list)  # tried in order (ADR 0061)


class ProviderSettings(_Section):
    type: Literal["openai", "openai_compatible"]
    api_key_env: str | None = None
    api_key: str | None = None
    base_url: str | None = None
    timeout_s: float = 120.0
    max_retries: int = 2
    # send the stable prompt prefix once at start, after a reload and when the server comes
    # back, so the first message reuses it (ADR 0089); ``auto``: on for servers on this machine
    warm: Literal["auto", "on", "off"] = "auto"
    # tools' schemas: all in every request, or the resident ones and the groups the model
    # loads (ADR 0097); ``auto``: on demand for a server on this machine
    tool_schemas: Literal["auto", "all", "on_demand"] = "auto"
    # the turn's note (clock, context) kept in the history, so the next turn's request
    # repeats this one's bytes and only its own note and words are new (ADR 0097)
    turn_notes: Literal["auto", "kept", "fresh"] = "auto"

    @property
    def on_this_machine(self) -> bool:
        """An OpenAI-compatible server on this machine (a loopback address)."""
        return self.type == "openai_compatible" and is_loopback_url(self.base_url)

    @property
    def schemas_on_demand(self) -> bool:
        """Whether requests to this provider carry only the tools the model loaded."""
        if self.tool_schemas != "auto":
            return self.tool_schemas == "on_demand"
        return self.on_this_machine

    @property
    def keeps_notes(self) -> bool:
        """Whether a turn's note is stored with its history for this provider."""
        if self.turn_notes != "auto":
            return self.turn_notes == "kept"
        return self.on_this_machine

    @property
    def warmed(self) -> bool:
        """Whether Hearth warms this provider's prompt cache: ``on``, or ``auto`` for a
        server on this machine (a paid provider is never sent a request unasked)."""
        if self.warm != "auto":
            return self.warm == "on"
        return self.on_this_machine


def is_loopback_url(url: str | None) -> bool:
    """Whether ``url`` names a server on this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = urlsplit(url or "").hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def _default_providers() -> dict[str, ProviderSettings]:
    return {"openai": ProviderSettings(type="openai", api_key_env="OPENAI_API_KEY")}


class ModelsSettings(_Section):
    default: ModelRef | None = ModelRef(provider="openai", model="gpt-5-mini")
    providers: dict[str, ProviderSettings] = Field(default_factory=_default_providers)
    agents: dict[str, ModelRef] = Field(default_factory=dict)
    tracing: bool = False
    # a model that failed (after its provider's retries) is skipped this long, doubling
    # while it keeps failing, up to cooldown_max_s (ADR 0061)
    cooldown_s: float = Field(default=30.0, gt=0)
    cooldown_max_s: float = Field(default=600.0, gt=0)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)  # MODEL or PROVIDER/MODEL
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    local_server: LocalServerSettings = Field(default_factory=LocalServerSettings)


class ChannelsSettings(_Section):
    default: str = "cli_channel"


class IsolationSettings(_Section):
    # where an extension that is not bundled runs when its manifest does not say:
    # sandboxed by default; bundled extensions keep their own defaults (ADR 0086)
    default: Literal["inprocess", "process"] = "process"
    call_timeout_s: float = 30.0
    memory_mb: int = 512
    cpu_seconds: int = 600
    open_files: int = 256
    confinement: Literal["auto", "bwrap", "none"] = "auto"
    restart_backoff_max_s: float = 60.0
    cgroups: Literal["auto", "none"] = "auto"
    pids_max: int = Field(default=128, ge=8)
    cpu_percent: int = Field(default=100, ge=1)
    tmp_mb: int = Field(default=64, ge=1)
    data_quota_mb: int = Field(default=1024, ge=1)
    watchdog_interval_s: float = Field(default=1.0, gt=0)


class EventsSettings(_Section):
    synchronous: Literal["normal", "full"] = "normal"
    max_attempts: int = 5
    retry_base_s: float = 0.5
    retry_max_s: float = 60.0
    poll_interval_s: float = 1.0
    retention_days: float = 7.0
    stop_timeout_s: float = 10.0
    max_payload_bytes: int = Field(default=256 * 1024, ge=1024)


class LoaderSettings(_Section):
    health_check_interval_s: float = 30.0
    lifecycle_timeout_s: float = 10.0
    restart_backoff_max_s: float = 300.0
    max_subscriptions: int = Field(default=64, ge=1)  # event subscriptions per extension


class RateLimitsSettings(_Section):
    """Per-extension token buckets for calls that reach the user or the model."""

    notify_per_minute: float = Field(default=30.0, gt=0)
    notify_burst: int = Field(default=10, ge=1)
    agent_requests_per_minute: float = Field(default=20.0, gt=0)
    agent_requests_burst: int = Field(default=5, ge=1)


class SupervisorSettings(_Section):
    max_crashes: int = 5
    crash_window_s: float = 300.0
    stop_timeout_s: float = 20.0
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 60.0
    healthy_reset_s: float = 600.0
    quick_restarts: int = Field(default=3, ge=0)
    restart_window_s: float = Field(default=60.0, gt=0)


class McpServerSettings(_Section):
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    allowed_tools: list[str] | None = None
    enabled: bool = True

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("needs exactly one of `command` (stdio) or `url` (streamable HTTP)")
        return self


class McpSettings(_Section):
    servers: dict[str, McpServerSettings] = Field(default_factory=dict)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    call_timeout_s: float = Field(default=60.0, gt=0)
    health_interval_s: float = Field(default=15.0, gt=0)
    reconnect_initial_s: float = Field(default=1.0, gt=0)
    reconnect_max_s: float = Field(default=60.0, gt=0)
    reconnect_max_attempts: int = Field(default=10, ge=1)


class TurnsSettings(_Section):
    """Deadlines and limits of the chat path (SPEC §10 ``turns.*``): nothing waits forever."""

    timeout_s: float = Field(default=120.0, gt=0)
    command_timeout_s: float = Field(default=30.0, gt=0)
    context_timeout_s: float = Field(default=5.0, gt=0)
    send_timeout_s: float = Field(default=30.0, gt=0)
    # turns (of different conversations) run at once; more messages wait in the journal
    concurrency: int = Field(default=32, ge=1, le=1024)
    # The stored history's budget (ADR 0020): when a conversation's stored items
    # exceed either limit, the oldest whole turns are summarised into one item
    # before the next turn reads them. Tokens are estimated as the characters of
    # the items' JSON divided by 4 (no tokenizer: cheap, and the same for every model).
    history_max_items: int | None = Field(default=200, gt=0)
    history_max_tokens: int | None = Field(default=None, gt=0)
    # after a compaction the kept (newest, unsummarised) items use at most this
    # share of each budget, so a compaction is needed again only after a while
    compaction_keep_fraction: float = Field(default=0.5, gt=0, lt=1)
    compaction_timeout_s: float = Field(default=30.0, gt=0)  # the summary's model call
    # a conversation quiet for longer starts a fresh session at its next message
    # (on_session_end "expired", then on_session_start); null: sessions end only with /new
    session_idle_timeout_s: float | None = Field(default=None, gt=0)


class PostProcessSettings(_Section):
    """Answer post-processors (``#json``, SPEC §9, docs/postprocessors.md)."""

    timeout_s: float = Field(default=30.0, gt=0)  # one post-processor, param check included
    # what every conversation starts with activated (the bundled ``postprocessors``
    # extension's, ADR 0063); a name no extension provides shows as "not available now"
    activate_by_default: tuple[str, ...] = ("json", "decision", "extract", "classify")
    # processors not offered at all (an activation of one shows "not available now")
    disabled: tuple[str, ...] = ()


# the hook methods a program may implement: the rows of the spec table with a
# ``hooks.commands`` event (core/extensions/contract/hook_specs.py); those given a tool call
# may take a ``matcher``
HookPoint = str
HOOK_POINTS: tuple[HookPoint, ...] = tuple(s.method for s in HOOK_SPECS if s.command_event)
TOOL_HOOK_POINTS: tuple[HookPoint, ...] = tuple(
    s.method for s in HOOK_SPECS if s.command_event and "call" in s.args
)


class CommandHook(_Section):
    """An external program run for one hook point (``hooks.commands``): JSON on
    stdin, JSON on stdout, the Claude Code hook shape accepted (docs/command-hooks.md).

    ``command`` is an argv list or a string split like a shell would (``shlex``)
    but run without one. ``matcher`` (tool hooks only) must match the whole tool
    name; ``*`` or an empty matcher means every tool.
    """

    hook: HookPoint
    command: str | list[str] = Field(min_length=1)
    matcher: str | None = None  # before/after_tool_call: a regular expression on the tool name
    timeout_s: float | None = Field(default=None, gt=0)  # default: hooks.timeout_s
    priority: int = Field(default=50, ge=0, le=100)
    name: str | None = Field(default=None, min_length=1)  # default: from the command

    @field_validator("hook")
    @classmethod
    def _hook_known(cls, value: str) -> str:
        if value not in HOOK_POINTS:
            raise ValueError(f"{value!r} is not a hook point; one of {', '.join(HOOK_POINTS)}")
        return value

    @field_validator("command")
    @classmethod
    def _command_splits(cls, value: str | list[str]) -> str | list[str]:
        split_command(value)
        return value

    @field_validator("matcher")
    @classmethod
    def _matcher_fits(cls, value: str | None, info: ValidationInfo) -> str | None:
        hook = info.data.get("hook")
        if value is not None and hook is not None and hook not in TOOL_HOOK_POINTS:
            raise ValueError(f"only {' and '.join(TOOL_HOOK_POINTS)} take a matcher, not {hook}")
        compile_matcher(value)
        return value

    @property
    def argv(self) -> list[str]:
        return split_command(self.command)

    @property
    def tool_matcher(self) -> re.Pattern[str] | None:
        """The compiled matcher (``None``: every tool)."""
        return compile_matcher(self.matcher)


def split_command(command: str | list[str]) -> list[str]:
    """The argv of a ``hooks.commands`` entry; ``ValueError`` when there is none."""
    try:
        argv = shlex.split(command) if isinstance(command, str) else list(command)
    except ValueError as exc:  # an unclosed quote
        raise ValueError(f"cannot be split into arguments: {exc}") from exc
    if not argv or not argv[0]:
        raise ValueError("names no program")
    return argv


def compile_matcher(matcher: str | None) -> re.Pattern[str] | None:
    """A tool-name matcher anchored at both ends; ``ValueError`` if it does not compile."""
    if matcher is None or matcher.strip() in ("", "*"):
        return None
    try:
        re.compile(matcher)  # alone first: "a)|(b" must not slip through the anchors
        return re.compile(rf"\A(?:{matcher})\Z")
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from exc


class HooksSettings(_Section):
    """The turn pipeline's hooks (SPEC §9, docs/hooks.md)."""

    timeout_s: float = Field(default=2.0, gt=0)
    commands: list[CommandHook] = Field(default_factory=list)
    # extensions whose route_model decides the turn's model; others only advise (logged)
    authoritative_routing: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _names_unique(self) -> HooksSettings:
        seen: dict[str, int] = {}
        for index, command in enumerate(self.commands):
            if command.name is None:
                continue
            if command.name in seen:
                raise ValueError(
                    f"commands.{index}.name: {command.name!r} is already the name of "
                    f"commands.{seen[command.name]}"
                )
            seen[command.name] = index
        return self


class Settings(ScaleOutSections, BaseSettings):
    """The whole of ``settings.yaml`` (``storage``, ``kernel``, ``scheduling``: the base)."""

    model_config = SettingsConfigDict(
        extra="forbid",
        env_prefix="HEARTH__",
        env_nested_delimiter="__",
        env_file=None,
    )

    paths: PathsSettings = Field(default_factory=PathsSettings)
    timezone: str = "local"
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    models: ModelsSettings = Field(default_factory=ModelsSettings)
    channels: ChannelsSettings = Field(default_factory=ChannelsSettings)
    extensions: dict[str, dict[str, Any]] = Field(default_factory=dict)
    isolation: IsolationSettings = Field(default_factory=IsolationSettings)
    events: EventsSettings = Field(default_factory=EventsSettings)
    loader: LoaderSettings = Field(default_factory=LoaderSettings)
    supervisor: SupervisorSettings = Field(default_factory=SupervisorSettings)
    rate_limits: RateLimitsSettings = Field(default_factory=RateLimitsSettings)
    hooks: HooksSettings = Field(default_factory=HooksSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    turns: TurnsSettings = Field(default_factory=TurnsSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    state: StateSettings = Field(default_factory=StateSettings)
    tools: ToolsSettings = Field(default_factory=ToolsSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    postprocess: PostProcessSettings = Field(default_factory=PostProcessSettings)
    replay: ReplaySettings = Field(default_factory=ReplaySettings)
    dev: DevSettings = Field(default_factory=DevSettings)
    people: People = Field(default_factory=dict)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)
    workflows: WorkflowsSettings = Field(default_factory=WorkflowsSettings)
    files: FilesSettings = Field(default_factory=FilesSettings)

    _settings_file: Path | None = PrivateAttr(default=None)
    _base_file: Path = PrivateAttr(default=DEFAULT_SETTINGS_FILE)
    _layers: tuple[Layer, ...] = PrivateAttr(default=())

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment beats the file (passed as init kwargs), file beats defaults;
        # extensions' values from the environment read as YAML reads them (env_values).
        return (YamlValuedEnv(settings_cls), init_settings)

    # ------------------------------------------------------------------ paths

    @property
    def extensions_dir(self) -> Path:
        return resolve_path(self.paths.extensions)

    @property
    def data_dir(self) -> Path:
        return resolve_path(self.paths.data)

    @property
    def settings_file(self) -> Path | None:
        """The base file these settings were read from (``None``: defaults only)."""
        return self._settings_file

    @property
    def local_settings_file(self) -> Path:
        """The base file's local layer, where ``setup`` writes (it may not exist yet)."""
        return local_layer_path(self._base_file)

    @property
    def layers(self) -> tuple[Layer, ...]:
        """The files read, lowest first (absent ones as empty layers)."""
        return self._layers


def resolve_path(path: Path) -> Path:
    """Relative paths are anchored at the project root, not the cwd (SPEC §7)."""
    return path if path.is_absolute() else PROJECT_ROOT / path


def load_settings(path: str | Path | None = None) -> Settings:
    """Read and validate the settings layers: the base file (``path``, else the
    project's ``settings.yaml``; defaults only when that one is missing), its
    local layer when there is one, the environment.

    Raises ``SettingsError`` naming the file (or variable) and the offending key.
    """
    base = Path(path) if path is not None else DEFAULT_SETTINGS_FILE
    layers = [read_layer(base, required=path is not None)]
    if local_layer_path(base) != base:
        layers.append(read_layer(local_layer_path(base)))
    settings = validated(Settings, tuple(layers))
    settings._layers = tuple(layers)
    settings._base_file = base.resolve()
    settings._settings_file = base.resolve() if base.is_file() else None
    return settings


def non_defaults(settings: Settings) -> list[tuple[str, str]]:
    """(dotted key, where it was set) of every key not at its default: the models'
    defaults, or the project's tracked ``settings.yaml`` that ships them."""
    defaults = Settings.model_construct().model_dump(mode="json")
    current = settings.model_dump(mode="json")
    return changed_keys(current, defaults, settings.layers, tracked=DEFAULT_SETTINGS_FILE)
