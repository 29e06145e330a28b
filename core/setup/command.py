"""``main.py setup``: the wizard in a terminal, or one command line for scripts.

``main.py setup --provider openai_compatible --base-url URL --model NAME``
(SPEC §10) checks the provider offers the model, then writes the same keys
the wizard would; nothing is written when the check fails. ``main.py setup
--local-model [--yes]`` installs the local model, offline (ADR 0098): its
size is stated first and nothing is downloaded without a yes. Logging is
held at WARNING meanwhile: an HTTP client logging at INFO would print
request URLs, and the Bot API's carry the token.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from core.config import Settings, SettingsError, load_settings
from core.runtime import load_secrets, pinned
from core.setup.local_model import download_notice
from core.setup.plan import SetupPlan, local_layer
from core.setup.probes import ProbeError, list_models
from core.setup.terminal import SetupCancelled, TerminalAsker

__all__ = ["run_setup_command"]


def run_setup_command(settings: Settings, args: argparse.Namespace) -> int:
    logging.getLogger().setLevel(logging.WARNING)
    # "telegram": the Telegram channel's setup; the Bot API's URLs carry the token
    for name in ("httpx", "httpcore", "openai", "telegram"):
        logging.getLogger(name).setLevel(logging.WARNING)
    if args.local_model:
        if args.provider:
            print("hearth setup: --local-model is a provider of its own", file=sys.stderr)
            return 2
        return asyncio.run(_scripted_local(settings, yes=args.yes))
    if args.provider:
        return asyncio.run(_scripted(settings, args))
    if args.base_url or args.model or args.api_key_env:
        print(
            "hearth setup: --base-url, --model and --api-key-env go with --provider",
            file=sys.stderr,
        )
        return 2
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(
            "hearth setup: the wizard asks questions in a terminal; for scripts use "
            "main.py setup --provider openai|openai_compatible [--base-url URL] --model NAME",
            file=sys.stderr,
        )
        return 2
    return asyncio.run(_interactive(settings))


async def _scripted(settings: Settings, args: argparse.Namespace) -> int:
    if not args.model:
        print("hearth setup: --provider needs --model NAME", file=sys.stderr)
        return 2
    if args.provider == "openai_compatible" and not args.base_url:
        print("hearth setup: --provider openai_compatible needs --base-url URL", file=sys.stderr)
        return 2
    key_env = args.api_key_env or ("OPENAI_API_KEY" if args.provider == "openai" else None)
    key = load_secrets().get(key_env, "") if key_env else ""
    if args.provider == "openai" and not key:
        print(f"hearth setup: {key_env} is not set (environment or .env)", file=sys.stderr)
        return 1
    base_url = args.base_url if args.provider == "openai_compatible" else None
    try:
        models = await list_models(base_url, key or "none")
    except ProbeError as exc:
        print(f"hearth setup: {exc}; nothing written", file=sys.stderr)
        return 1
    if args.model not in models:
        offered = ", ".join(models[:20]) or "none"
        print(
            f"hearth setup: model {args.model!r} is not offered (offered: {offered}); "
            "nothing written",
            file=sys.stderr,
        )
        return 1
    plan = SetupPlan()
    plan.use_model(args.provider, args.model, base_url=base_url, api_key_env=args.api_key_env)
    return _write(plan, settings)


async def _scripted_local(settings: Settings, *, yes: bool) -> int:
    """``--local-model``: install it and write its settings; the download needs a yes,
    typed at a terminal or given as ``--yes``."""
    from core.setup.wizard import local_model_step

    if not yes and not (sys.stdin.isatty() and sys.stdout.isatty()):
        print(download_notice(settings.models.local_server.files, pinned()))
        print("hearth setup: add --yes to download it; nothing downloaded", file=sys.stderr)
        return 2
    plan = SetupPlan()
    try:
        if not await local_model_step(settings, TerminalAsker(), plan, agreed=yes):
            return 1
    except SetupCancelled:
        print("\nSetup stopped; nothing downloaded.", flush=True)
        return 130
    return _write(plan, settings)


async def _interactive(settings: Settings) -> int:
    # here, not at the top: every main.py command imports this module for its
    # arguments, and the extension step imports the whole kernel
    from core.setup.extension_step import run_extension_setups
    from core.setup.wizard import run_wizard

    ask = TerminalAsker()
    try:
        plan = await run_wizard(settings, ask)
        if _write(plan, settings):
            return 1
        try:
            written = load_settings(settings.settings_file)
        except SettingsError as exc:
            print(f"hearth setup: {exc}", file=sys.stderr)
            return 1
        await run_extension_setups(written, ask)
    except SetupCancelled:
        print("\nSetup stopped.", flush=True)
        return 130
    print(
        "Done. `make run` (or .venv/bin/python main.py) starts Hearth; "
        "`main.py doctor` checks everything."
    )
    return 0


def _write(plan: SetupPlan, settings: Settings) -> int:
    """The answers go to the local layer over the base file (ADR 0045)."""
    target, below = local_layer(settings)
    try:
        for line in plan.write(target, below=below):
            print(line, flush=True)
    except (SettingsError, OSError, ValueError) as exc:
        print(f"hearth setup: {exc}; nothing written to {target}", file=sys.stderr)
        return 1
    return 0
