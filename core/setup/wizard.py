"""``main.py setup`` in a terminal: model, timezone, then the extensions' own setups.

Every step shows what is configured now and keeps it on Enter, so the
wizard can be run again to change one thing. The model is checked live
before it is kept (``GET /models``); a local model, offline, is installed
only after its size is stated and the user says yes (ADR 0098). What an
extension needs — the Telegram channel's bot token and allow-list among
them — the extension asks itself (its ``SetupProvider``,
``extension_step.py``): the kernel knows no particular extension.
"""

from __future__ import annotations

import asyncio

from core.config import Settings
from core.extensions.sdk import UnknownTimezoneError, local_zone, resolve_zone
from core.runtime import load_secrets, pinned
from core.setup.local_model import LocalModelError, download_notice, install_local_model
from core.setup.plan import LOCAL_KEY_ENV, LOCAL_PROVIDER, OPENAI_KEY_ENV, SetupPlan
from core.setup.probes import ProbeError, list_models
from core.setup.terminal import TerminalAsker

__all__ = ["local_model_step", "run_wizard"]

DEFAULT_LOCAL_URL = "http://127.0.0.1:11434/v1"
KEEP = "keep the current model"
LOCAL_MODEL = "a local model, offline (installed here from the package index)"
PROVIDERS = (
    "OpenAI (an API key)",
    "a local OpenAI-compatible server (Ollama, llama.cpp, LM Studio)",
    LOCAL_MODEL,
    KEEP,
)
DISCOVERY_S = 60.0


async def run_wizard(settings: Settings, ask: TerminalAsker) -> SetupPlan:
    """Ask everything; the plan of what to write (nothing is written here)."""
    plan = SetupPlan()
    secrets = load_secrets()
    ask.say("Hearth setup. Enter keeps what is shown in [brackets]; Ctrl-C stops, writing nothing.")
    await _model_step(settings, secrets, ask, plan)
    await _timezone_step(settings, ask, plan)
    return plan


# ---------------------------------------------------------------- model


async def _model_step(
    settings: Settings, secrets: dict[str, str], ask: TerminalAsker, plan: SetupPlan
) -> None:
    current = settings.models.default
    now = f"{current.provider}/{current.model}" if current else "none"
    ask.say(f"\n1. Model (now: {now})")
    choice = await ask.choose("Which provider", PROVIDERS, KEEP if current else None)
    if choice == KEEP:
        return
    if choice == LOCAL_MODEL:
        await local_model_step(settings, ask, plan)
        return
    if choice == PROVIDERS[0]:
        key = await ask.secret("OpenAI API key (hidden; Enter keeps the one set now)")
        key = key or secrets.get(OPENAI_KEY_ENV, "")
        models = await _models_or_none(ask, None, key)
        if models is None:
            return
        model = await _pick_model(ask, models, "gpt-5-mini")
        if key and key != secrets.get(OPENAI_KEY_ENV):
            plan.secrets[OPENAI_KEY_ENV] = key
        plan.use_model("openai", model, base_url=None, api_key_env=OPENAI_KEY_ENV)
        await _price_step(settings, ask, plan, model)
        return
    known = settings.models.providers.get(LOCAL_PROVIDER)
    url_now = known.base_url if known and known.base_url else DEFAULT_LOCAL_URL
    while True:
        base_url = await ask.line("Server address (its OpenAI-compatible /v1)", url_now)
        key = await ask.secret("API key, if the server wants one (hidden; Enter: none)")
        models = await _models_or_none(ask, base_url, key or "none")
        if models is not None:
            break
        if not await ask.confirm("Try another address", True):
            return
    model = await _pick_model(ask, models, current.model if current else None)
    if key:
        plan.secrets[LOCAL_KEY_ENV] = key
    env = LOCAL_KEY_ENV if key else None
    plan.use_model("openai_compatible", model, base_url=base_url, api_key_env=env)
    await _price_step(settings, ask, plan, model)


async def local_model_step(
    settings: Settings, ask: TerminalAsker, plan: SetupPlan, *, agreed: bool = False
) -> bool:
    """Install the local model (ADR 0098) after saying its size and hearing yes
    (``agreed``: the scripted ``--yes``); ``True`` when it is installed and planned."""
    local = settings.models.local_server
    model = pinned()
    ask.say(download_notice(local.files, model))
    if not agreed and not await ask.confirm("Download and install it now", False):
        ask.say("Nothing downloaded.")
        return False
    try:
        await asyncio.to_thread(install_local_model, local.files, ask.say)
    except (LocalModelError, OSError) as exc:
        ask.say(f"Not installed: {exc}")
        return False
    ask.say(
        f"Installed. Hearth starts its server on {local.base_url} beside the kernel "
        "(`main.py`, `main.py daemon`); `main.py doctor` shows its state."
    )
    plan.use_local_model(local, model.model_name)
    return True


async def _price_step(settings: Settings, ask: TerminalAsker, plan: SetupPlan, model: str) -> None:
    """Optional: the model's prices per million tokens, for /usage and budgets
    (docs/models.md). Enter skips; none are guessed."""
    known = settings.models.prices.get(model)
    now = f"{known.input:g} {known.cached_input or known.input:g} {known.output:g}" if known else ""
    currency = settings.models.budget.currency
    while True:
        answer = await ask.line(
            f"Prices of {model} per 1M tokens in {currency}: input, cached input, output "
            "(e.g. 0.25 0.025 2; Enter: skip)",
            now or None,
        )
        if not answer or answer == now:
            return
        try:
            numbers = [float(part) for part in answer.replace(",", " ").split()]
        except ValueError:
            numbers = []
        if len(numbers) == 3 and all(n >= 0 for n in numbers):
            plan.use_price(model, *numbers)
            return
        ask.say("Three numbers, none negative, please (or Enter to skip).")


async def _models_or_none(ask: TerminalAsker, base_url: str | None, key: str) -> list[str] | None:
    try:
        models = await list_models(base_url, key)
    except ProbeError as exc:
        ask.say(f"Could not list the models: {exc}")
        return None
    if not models:
        ask.say("The server answered but offers no models (pull or load one first).")
        return None
    ask.say(f"Reachable: {len(models)} model(s).")
    return models


async def _pick_model(ask: TerminalAsker, models: list[str], preferred: str | None) -> str:
    default = preferred if preferred in models else models[0]
    return await ask.choose("Which model", models, default)


# ---------------------------------------------------------------- timezone


async def _timezone_step(settings: Settings, ask: TerminalAsker, plan: SetupPlan) -> None:
    key = getattr(local_zone(), "key", None)
    detected = key if key and key != "localtime" else "local"
    default = settings.timezone if settings.timezone != "local" else detected
    ask.say(f"\n2. Timezone (now: {settings.timezone}; this machine: {detected})")
    while True:
        zone = await ask.line("Timezone for reminders (IANA name, e.g. Europe/Berlin)", default)
        try:
            resolve_zone(zone)
        except UnknownTimezoneError as exc:
            ask.say(str(exc))
            continue
        if zone != settings.timezone:
            plan.use_timezone(zone)
        return
