"""Hearth command line (SPEC §8). Replies and reports go to stdout, logs to stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SUBCOMMANDS = ("run", "daemon", "extensions", "events", "doctor", "metrics")


def build_parser() -> argparse.ArgumentParser:
    from core.events.cli import add_events_arguments

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--settings",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="settings file (default: settings.yaml in the project root)",
    )
    parser = argparse.ArgumentParser(
        prog="main.py", description="Hearth personal-assistant kernel", parents=[common]
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", parents=[common], help="run the kernel in the foreground (default)")
    sub.add_parser("daemon", parents=[common], help="run the kernel under the supervisor")
    ext = sub.add_parser("extensions", parents=[common], help="load all extensions and report")
    ext.add_argument("--json", action="store_true", help="one JSON array, one object each")
    ext_sub = ext.add_subparsers(dest="ext_command", metavar="ACTION")
    grant = ext_sub.add_parser(
        "grant", parents=[common], help="grant what extensions ask (shown in plain words)"
    )
    grant.add_argument("ids", nargs="+", metavar="ID", help="extension ids")
    grant.add_argument("--yes", action="store_true", help="grant without asking (scripts)")
    events = sub.add_parser("events", parents=[common], help="inspect the event journal")
    add_events_arguments(events)
    sub.add_parser("doctor", parents=[common], help="check settings, models, secrets")
    sub.add_parser(
        "metrics", parents=[common], help="print the metrics (running kernel or last snapshot)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = args.command or "run"
    settings_arg = getattr(args, "settings", None)
    settings_file = Path(settings_arg).resolve() if settings_arg else None

    from core.logging_setup import configure_logging
    from core.settings import SettingsError, load_settings

    try:
        settings = load_settings(settings_file)
    except SettingsError as exc:
        print(f"hearth: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.logging.level, settings.logging.format)

    if command == "run":
        from core.cli.run import run_kernel

        return run_kernel(settings, sys.argv)
    if command == "daemon":
        from core.supervisor import run_supervisor

        return run_supervisor(settings, settings_file)
    if command == "extensions" and getattr(args, "ext_command", None) == "grant":
        from core.cli.grant import run_grant

        return run_grant(settings, args.ids, yes=args.yes)
    if command == "extensions":
        from core.cli.report import run_extensions_report

        return run_extensions_report(settings, as_json=args.json)
    if command == "events":
        import asyncio

        from core.events.backend import journal_for
        from core.events.cli import run_events_command
        from core.kernel.runner import JOURNAL_FILE

        path = settings.data_dir / JOURNAL_FILE
        postgres = settings.storage.backend == "postgres"
        journal = journal_for(path, settings.events, settings.storage) if postgres else path
        return asyncio.run(run_events_command(journal, args))
    if command == "metrics":
        from core.cli.metrics import run_metrics

        return run_metrics(settings)
    from core.cli.doctor import run_doctor

    return run_doctor(settings)


if __name__ == "__main__":
    sys.exit(main())
