"""Hearth command line (SPEC §8). Replies and reports go to stdout, logs to stderr."""

from __future__ import annotations

import sys
from pathlib import Path

from core.cli.arguments import build_parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = args.command or "run"
    settings_arg = getattr(args, "settings", None)
    settings_file = Path(settings_arg).resolve() if settings_arg else None

    from core.config import SettingsError, load_settings
    from core.runtime import configure_logging

    try:
        settings = load_settings(settings_file)
    except SettingsError as exc:
        print(f"hearth: {exc}", file=sys.stderr)
        return 2
    if command == "run":
        from core.cli.run import LOG_FILE, quiet_terminal, run_kernel

        quiet = quiet_terminal() and not getattr(args, "verbose", False)
        log_file = settings.data_dir / LOG_FILE if quiet else None
        configure_logging(settings.logging.level, settings.logging.format, log_file=log_file)
        if log_file is not None:
            print(f"Logs go to {log_file} (--verbose shows them here).")
        return run_kernel(settings, sys.argv)
    configure_logging(settings.logging.level, settings.logging.format)
    if command == "mcp":
        import asyncio

        from core.mcp_server import KernelLink, ToolListing, serve_stdio

        asyncio.run(serve_stdio(KernelLink(settings, args.client), ToolListing(settings)))
        return 0
    if command == "daemon":
        from core.supervisor import run_supervisor

        return run_supervisor(settings, settings_file)
    if command == "extensions" and getattr(args, "ext_command", None) == "grant":
        from core.cli.grant import run_grant

        return run_grant(settings, args.ids, yes=args.yes)
    if command == "extensions" and getattr(args, "ext_command", None) == "reload":
        from core.cli.reload import run_reload

        return run_reload(settings, args.id, timeout_s=args.timeout)
    if command == "extensions":
        from core.cli.report import run_extensions_report

        return run_extensions_report(settings, as_json=args.json)
    if command == "events":
        import asyncio

        from core.events.backend import journal_for
        from core.events.cli import run_events_command
        from core.runtime import JOURNAL_FILE

        path = settings.data_dir / JOURNAL_FILE
        postgres = settings.storage.backend == "postgres"
        journal = journal_for(path, settings.events, settings.storage) if postgres else path
        return asyncio.run(run_events_command(journal, args))
    if command == "setup":
        from core.setup import run_setup_command

        return run_setup_command(settings, args)
    if command == "new-extension":
        from core.cli.scaffold import run_new_extension

        return run_new_extension(settings, args)
    if command == "metrics":
        from core.cli.metrics import run_metrics

        return run_metrics(settings)
    if command == "skills":
        from core.cli.skills import run_skills_check, run_skills_list

        if getattr(args, "skills_command", None) == "check":
            return run_skills_check(args.path)
        return run_skills_list(settings, as_json=args.json)
    if command == "usage":
        from core.cli.usage import run_usage

        return run_usage(settings, args)
    if command == "replay":
        from core.cli.replay import run_replay_command

        return run_replay_command(settings, args)
    from core.cli.doctor import run_doctor

    return run_doctor(settings, verbose=getattr(args, "verbose", False))


if __name__ == "__main__":
    sys.exit(main())
