"""Hearth command line (SPEC §8). Replies and reports go to stdout, logs to stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SUBCOMMANDS = (
    "run", "daemon", "extensions", "events", "doctor", "metrics", "setup", "new-extension",
    "replay", "skills", "mcp",
)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    from core.cli.scaffold import add_scaffold_arguments
    from core.cli.skills import add_skills_arguments
    from core.cli.usage import add_usage_arguments
    from core.events.cli import add_events_arguments
    from core.replay.arguments import add_replay_arguments
    from core.setup import add_setup_arguments

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--settings",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="base settings file (default: settings.yaml in the project root); "
        "its local layer NAME.local.yaml beside it is read over it",
    )
    common.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="interactive run: show the logs in the terminal (default: <data>/hearth.log)",
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
    reload = ext_sub.add_parser(
        "reload", parents=[common], help="reload one extension in the running kernel"
    )
    reload.add_argument("id", metavar="ID", help="extension id")
    reload.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="wait this long (default 120)"
    )
    events = sub.add_parser("events", parents=[common], help="inspect the event journal")
    add_events_arguments(events)
    sub.add_parser("doctor", parents=[common], help="check settings, models, secrets")
    sub.add_parser(
        "metrics", parents=[common], help="print the metrics (running kernel or last snapshot)"
    )
    usage = sub.add_parser(
        "usage", parents=[common], help="tokens and cost per day or month, person and model"
    )
    add_usage_arguments(usage)
    setup = sub.add_parser(
        "setup", parents=[common], help="choose the model, Telegram, timezone (asks; re-runnable)"
    )
    add_setup_arguments(setup)
    scaffold = sub.add_parser(
        "new-extension", parents=[common], help="write a working extension skeleton"
    )
    add_scaffold_arguments(scaffold)
    replay = sub.add_parser(
        "replay", parents=[common], help="re-run a recorded conversation, report divergence"
    )
    add_replay_arguments(replay)
    skills = sub.add_parser("skills", parents=[common], help="list the skills, with any errors")
    add_skills_arguments(skills, common)
    mcp = sub.add_parser("mcp", parents=[common], help="serve MCP over stdio (docs/mcp-server.md)")
    mcp.add_argument(
        "--client", default="local", metavar="NAME", help="who the client is: identity mcp:NAME"
    )
    return parser


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

        from core.mcp_server import KernelLink, serve_stdio

        asyncio.run(serve_stdio(KernelLink(settings, args.client)))
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
        from core.kernel.runner import JOURNAL_FILE

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
        from core.replay.cli import run_replay_command

        return run_replay_command(settings, args)
    from core.cli.doctor import run_doctor

    return run_doctor(settings)


if __name__ == "__main__":
    sys.exit(main())
