"""ModelRouter: which model serves which agent, built from ``settings.models``.

Resolution never touches the network: clients are created lazily, once per
provider, and a missing key or provider only raises ``ModelNotConfiguredError``
when an agent actually asks for its model, so the kernel always starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agents import set_tracing_disabled
from agents.models.interface import Model
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

from core.agents.errors import ModelNotConfiguredError
from core.agents.fallback import FallbackModel, ModelHealth
from core.agents.openai_client import ConversationOpenAI
from core.agents.tool_view import OnDemandModel, ToolView
from core.config import FallbackRef, ModelRef, ModelsSettings, ProviderSettings
from core.runtime import load_secrets

__all__ = ["ModelChoice", "ModelRouter", "ProviderCheck", "WarmTarget", "configure_tracing"]

log = logging.getLogger("core.agents.model_router")

OVERRIDE_ALL = "*"
_DEFAULT_OPENAI_KEY_ENV = "OPENAI_API_KEY"
_NO_KEY_NEEDED = "not-needed"


def configure_tracing(enabled: bool) -> None:
    """Switch the SDK's trace export on or off (once, at kernel start)."""
    set_tracing_disabled(not enabled)


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The provider and model id one agent resolves to."""

    provider_name: str
    provider: ProviderSettings
    model: str

    def __str__(self) -> str:
        return f"{self.provider.type}:{self.label}"

    @property
    def label(self) -> str:
        """``provider/model``: how metrics, ``/usage`` and the cool-downs name it."""
        return f"{self.provider_name}/{self.model}"


@dataclass(frozen=True, slots=True)
class WarmTarget:
    """The model whose prompt cache Hearth warms, and what it resolved from."""

    choice: ModelChoice
    model: Model


@dataclass(frozen=True, slots=True)
class ProviderCheck:
    """Result of probing one provider for ``main.py doctor``."""

    name: str
    ok: bool
    detail: str


class ModelRouter:
    """Maps agent ids to ``agents`` Model objects (``models.agents`` > ``models.default``).

    ``overrides`` (tests): agent id -> Model, ``"*"`` for every agent. Keys come
    from ``env``, by default the environment and ``.env`` (``load_secrets``).
    """

    def __init__(
        self,
        settings: ModelsSettings,
        *,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Model] | None = None,
        model_wrapper: Callable[[Model], Model] | None = None,
        tool_view: ToolView | None = None,
    ) -> None:
        self._settings = settings
        self._env: Mapping[str, str] = load_secrets() if env is None else env
        self._overrides = dict(overrides or {})
        self._clients: dict[str, AsyncOpenAI] = {}
        # one circuit breaker per model, for every chain (ADR 0061)
        self.health = ModelHealth(settings.cooldown_s, settings.cooldown_max_s)
        # every model handed out passes through it (the replay recorder, ADR 0033)
        self.model_wrapper = model_wrapper
        # what a provider with ``tool_schemas: on_demand`` is sent (ADR 0097)
        self.tool_view = tool_view or ToolView()

    # ------------------------------------------------------------ resolution

    def resolve(self, agent_id: str | None = None, model_name: str | None = None) -> ModelChoice:
        """Pick provider and model id; raise ``ModelNotConfiguredError`` if there is none.

        ``model_name`` (a declarative agent's ``agent.model``) wins; it may name a
        provider as ``provider/model``, else it uses the agent's or the default provider.
        """
        mapped = self._settings.agents.get(agent_id) if agent_id else None
        default = self._settings.default
        if model_name:
            provider_name, model = self._split_model_name(model_name)
            if provider_name is None:
                provider_name = self._fallback_provider(agent_id)
            where = f"agent.model {model_name!r}"
        elif mapped is not None:
            provider_name, model = mapped.provider, mapped.model
            where = f"models.agents.{agent_id}"
        elif default is not None:
            provider_name, model = default.provider, default.model
            where = "models.default"
        else:
            raise ModelNotConfiguredError(
                agent_id,
                "No model configured: models.default is null in settings.yaml; set it to "
                "{provider: openai, model: gpt-5-mini} with OPENAI_API_KEY set, or to a model "
                "of an openai_compatible provider (base_url) under models.providers",
            )
        return self._choice(provider_name, model, agent_id, where)

    def get_model(self, agent_id: str | None = None, model_name: str | None = None) -> Model:
        """The Model for ``agent_id``; raises ``ModelNotConfiguredError`` (one-line message).

        It is the agent's fallback chain (``FallbackModel``): the chosen model, then
        the ``fallbacks`` of its ``models.agents`` entry or of ``models.default``; a
        fallback that cannot be used (unknown provider, no key) is left out, logged.
        """
        model = self._override(agent_id)
        if model is None:
            chain = [
                (c.label, self._model_of(c, agent_id)) for c in self.chain(agent_id, model_name)
            ]
            model = FallbackModel(chain, self.health)
        wrapper = self.model_wrapper
        return model if wrapper is None else wrapper(model)

    def chain(
        self, agent_id: str | None = None, model_name: str | None = None
    ) -> list[ModelChoice]:
        """The models that may serve ``agent_id``, in order: ``resolve``'s choice, then
        the usable fallbacks (``ModelNotConfiguredError`` only for the first)."""
        first = self.resolve(agent_id, model_name)
        choices = [first]
        for index, ref in enumerate(self._fallbacks_of(agent_id)):
            try:
                choice = self._choice(ref.provider, ref.model, agent_id, f"fallbacks.{index}")
            except ModelNotConfiguredError as exc:
                log.warning("fallback %s/%s left out: %s", ref.provider, ref.model, exc.reason)
                continue
            if choice.label not in {c.label for c in choices}:
                choices.append(choice)
        return choices

    def warm_target(self, agent_id: str | None = None) -> WarmTarget | None:
        """The first model of ``agent_id``'s chain, bare (no fallback, no recorder: a
        warm-up is no turn), when its provider is to be warmed (``warm``, ADR 0089);
        ``None`` under an override (tests) or without a usable model."""
        if self._override(agent_id) is not None:
            return None
        try:
            choice = self.resolve(agent_id)
        except ModelNotConfiguredError:
            return None
        if not choice.provider.warmed:
            return None
        return WarmTarget(choice, self._model_of(choice, agent_id))

    def fallback_problems(self) -> list[str]:
        """Why each configured fallback that cannot be used is left out (``doctor``)."""
        refs = [("models.default", self._settings.default)]
        refs += [(f"models.agents.{a}", r) for a, r in self._settings.agents.items()]
        problems = []
        for where, ref in refs:
            for index, fallback in enumerate(ref.fallbacks if ref is not None else ()):
                at = f"{where}.fallbacks.{index}"
                try:
                    self._choice(fallback.provider, fallback.model, None, at)
                except ModelNotConfiguredError as exc:
                    problems.append(f"{at} ({fallback.provider}/{fallback.model}): {exc.reason}")
        return problems

    def on_demand(self, agent_id: str | None = None) -> bool:
        """Whether ``agent_id``'s first model gets its tools' schemas on demand, as the
        settings say (an override stands in for that model: a replay builds the same
        prompt); no model configured: no."""
        provider = self._provider_of(agent_id)
        return provider is not None and provider.schemas_on_demand

    def keeps_notes(self, agent_id: str | None = None) -> bool:
        """Whether ``agent_id``'s turns keep their note in the history (ADR 0097)."""
        provider = self._provider_of(agent_id)
        return provider is not None and provider.keeps_notes

    def _provider_of(self, agent_id: str | None) -> ProviderSettings | None:
        try:
            return self.resolve(agent_id).provider
        except ModelNotConfiguredError:
            return None

    def _model_of(self, choice: ModelChoice, agent_id: str | None) -> Model:
        client = self._client(choice.provider_name, choice.provider, agent_id)
        if choice.provider.type == "openai":
            return OpenAIResponsesModel(model=choice.model, openai_client=client)
        model = OpenAIChatCompletionsModel(model=choice.model, openai_client=client)
        if choice.provider.schemas_on_demand:
            return OnDemandModel(model, self.tool_view)
        return model

    def _fallbacks_of(self, agent_id: str | None) -> list[FallbackRef]:
        mapped = self._settings.agents.get(agent_id) if agent_id else None
        ref = mapped or self._settings.default
        return [] if ref is None else list(ref.fallbacks)

    def _choice(
        self, provider_name: str, model: str, agent_id: str | None, where: str
    ) -> ModelChoice:
        provider = self._settings.providers.get(provider_name)
        if provider is None:
            known = ", ".join(sorted(self._settings.providers)) or "none"
            raise ModelNotConfiguredError(
                agent_id,
                f"No model configured: provider {provider_name!r} ({where}) is not defined "
                f"under models.providers in settings.yaml (defined: {known})",
            )
        self._api_key(provider_name, provider, agent_id)  # raises when the key is missing
        return ModelChoice(provider_name, provider, model)

    def local_choice(self, agent_id: str | None = None) -> ModelChoice | None:
        """``agent_id``'s first model when a server on this machine serves it (it reads
        a whole prompt slowly, ADR 0098); ``None`` under an override or without one."""
        if self._override(agent_id) is not None:
            return None
        try:
            choice = self.resolve(agent_id)
        except ModelNotConfiguredError:
            return None
        return choice if choice.provider.on_this_machine else None

    def is_configured(self, agent_id: str | None = None) -> bool:
        try:
            self.get_model(agent_id)
        except ModelNotConfiguredError:
            return False
        return True

    def describe(self, agent_id: str | None = None, model_name: str | None = None) -> str:
        """E.g. ``openai_compatible:local/llama3``, or ``No model configured: <how to fix>``;
        with fallbacks, each after ``then``, a cooling one with its seconds left."""
        override = self._override(agent_id)
        if override is not None:
            return f"override:{type(override).__name__}"
        try:
            chain = self.chain(agent_id, model_name)
        except ModelNotConfiguredError as exc:
            return exc.reason
        return ", then ".join(self._state_of(choice) for choice in chain)

    def health_lines(self) -> list[str]:
        """What served last and which models cool down (``/status``)."""
        lines = [f"Last model served: {self.health.last_served}"] if self.health.last_served else []
        for label, (seconds, error) in self.health.cooling_models().items():
            lines.append(f"Cooling down: {label} for {seconds:.0f} s more ({error})")
        return lines

    def _state_of(self, choice: ModelChoice) -> str:
        seconds = self.health.cooling(choice.label)
        return f"{choice} (cooling {seconds:.0f} s)" if seconds else str(choice)

    # --------------------------------------------------------------- doctor

    async def check_providers(self, timeout_s: float = 3.0) -> list[ProviderCheck]:
        """Probe every provider with ``GET /models`` (no retries, ``timeout_s`` each)."""
        checks = [
            self._check_one(name, provider, timeout_s)
            for name, provider in self._settings.providers.items()
        ]
        return list(await asyncio.gather(*checks))

    async def _check_one(
        self, name: str, provider: ProviderSettings, timeout_s: float
    ) -> ProviderCheck:
        try:
            client = self._client(name, provider, None)
        except ModelNotConfiguredError as exc:
            return ProviderCheck(name, False, exc.reason)
        probe = client.with_options(timeout=timeout_s, max_retries=0)
        try:
            async with asyncio.timeout(timeout_s + 0.5):
                page = await probe.models.list()
        except TimeoutError:
            return ProviderCheck(name, False, f"no answer from {probe.base_url} in {timeout_s}s")
        except Exception as exc:
            return ProviderCheck(name, False, f"{probe.base_url}: {_one_line(exc)}")
        ids = [m.id for m in page.data]
        detail = f"reachable at {probe.base_url}; {len(ids)} model(s)"
        if ids:
            shown = ", ".join(ids[:8]) + (", …" if len(ids) > 8 else "")
            detail += f": {shown}"
        missing = sorted(m for m in self._models_of(name) if ids and m not in ids)
        if missing:
            detail += f"; configured but not offered: {', '.join(missing)}"
        return ProviderCheck(name, True, detail)

    async def aclose(self) -> None:
        """Close the cached HTTP clients (kernel shutdown)."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    # -------------------------------------------------------------- helpers

    def _override(self, agent_id: str | None) -> Model | None:
        if agent_id is not None and agent_id in self._overrides:
            return self._overrides[agent_id]
        return self._overrides.get(OVERRIDE_ALL)

    def _split_model_name(self, model_name: str) -> tuple[str | None, str]:
        prefix, sep, rest = model_name.partition("/")
        if sep and rest and prefix in self._settings.providers:
            return prefix, rest
        return None, model_name

    def _fallback_provider(self, agent_id: str | None) -> str:
        mapped = self._settings.agents.get(agent_id) if agent_id else None
        if mapped is not None:
            return mapped.provider
        if self._settings.default is not None:
            return self._settings.default.provider
        if len(self._settings.providers) == 1:
            return next(iter(self._settings.providers))
        raise ModelNotConfiguredError(
            agent_id,
            "No model configured: agent.model names no provider and models.default is null; "
            "write it as provider/model or set models.default in settings.yaml",
        )

    def _models_of(self, provider_name: str) -> set[str]:
        refs: list[ModelRef | None] = [self._settings.default, *self._settings.agents.values()]
        named = [(r.provider, r.model) for r in refs if r is not None]
        named += [(f.provider, f.model) for r in refs if r is not None for f in r.fallbacks]
        return {model for provider, model in named if provider == provider_name}

    def _api_key(self, name: str, provider: ProviderSettings, agent_id: str | None) -> str:
        if provider.type == "openai_compatible":
            if not provider.base_url:
                raise ModelNotConfiguredError(
                    agent_id,
                    f"No model configured: provider {name!r} is openai_compatible but has no "
                    "base_url in settings.yaml (e.g. http://127.0.0.1:11434/v1)",
                )
            from_env = self._env.get(provider.api_key_env) if provider.api_key_env else None
            return provider.api_key or from_env or _NO_KEY_NEEDED
        key_env = provider.api_key_env or _DEFAULT_OPENAI_KEY_ENV
        key = self._env.get(key_env) or provider.api_key
        if not key:
            raise ModelNotConfiguredError(
                agent_id,
                f"No model configured: set {key_env} (provider {name!r}), or add an "
                "openai_compatible provider (base_url) under models.providers in settings.yaml",
            )
        return key

    def client_of(self, agent_id: str | None = None) -> AsyncOpenAI:
        """The OpenAI client of the provider ``agent_id`` resolves to (the default's):
        for the calls beside the chat, such as transcribing a voice note (ADR 0096)."""
        choice = self.resolve(agent_id)
        return self._client(choice.provider_name, choice.provider, agent_id)

    def _client(self, name: str, provider: ProviderSettings, agent_id: str | None) -> AsyncOpenAI:
        client = self._clients.get(name)
        if client is None:
            client = ConversationOpenAI(
                api_key=self._api_key(name, provider, agent_id),
                base_url=provider.base_url,
                timeout=provider.timeout_s,
                max_retries=provider.max_retries,
            )
            self._clients[name] = client
        return client


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
