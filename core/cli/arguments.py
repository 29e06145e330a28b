"""The command line of ``main.py`` (SPEC §8), declared once and cheap to build.

Every command parses its arguments with this parser before it runs, so the
module imports nothing but ``argparse``: ``main.py usage``, ``events`` or
``--help`` must not pay for the SDK's imports (seconds on a small machine)
that only the commands running the kernel need. Each command's module is
imported by ``main.py`` once the command is known.
"""

from __future__ import annotations

import argparse

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; ``command`` is ``None`` when none is given (``run``)."""
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
    _extensions(
        sub.add_parser("extensions", parents=[common], help="load all extensions and report"),
        common,
    )
    _events(sub.add_parser("events", parents=[common], help="inspect the event journal"))
    sub.add_parser("doctor", parents=[common], help="check settings, models, secrets")
    sub.add_parser(
        "metrics", parents=[common], help="print the metrics (running kernel or last snapshot)"
    )
    _usage(
        sub.add_parser(
            "usage", parents=[common], help="tokens and cost per day or month, person and model"
        )
    )
    _setup(
        sub.add_parser(
            "setup",
            parents=[common],
            help="choose the model, Telegram, timezone (asks; re-runnable)",
        )
    )
    _new_extension(
        sub.add_parser("new-extension", parents=[common], help="write a working extension skeleton")
    )
    _replay(
        sub.add_parser(
            "replay", parents=[common], help="re-run a recorded conversation, report divergence"
        )
    )
    _skills(
        sub.add_parser("skills", parents=[common], help="list the skills, with any errors"), common
    )
    mcp = sub.add_parser("mcp", parents=[common], help="serve MCP over stdio (docs/mcp-server.md)")
    mcp.add_argument(
        "--client", default="local", metavar="NAME", help="who the client is: identity mcp:NAME"
    )
    return parser


def _extensions(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON array, one object each")
    actions = parser.add_subparsers(dest="ext_command", metavar="ACTION")
    grant = actions.add_parser(
        "grant", parents=[common], help="grant what extensions ask (shown in plain words)"
    )
    grant.add_argument("ids", nargs="+", metavar="ID", help="extension ids")
    grant.add_argument("--yes", action="store_true", help="grant without asking (scripts)")
    reload = actions.add_parser(
        "reload", parents=[common], help="reload one extension in the running kernel"
    )
    reload.add_argument("id", metavar="ID", help="extension id")
    reload.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="wait this long (default 120)"
    )


def _events(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=20, metavar="N", help="rows to show (20)")
    parser.add_argument("--topic", metavar="T", help="only events with this exact topic")
    parser.add_argument("--dead", action="store_true", help="list dead letters with their error")
    parser.add_argument(
        "--requeue", type=int, metavar="ID", help="put the dead deliveries of event ID back"
    )
    parser.add_argument(
        "--subscriber", metavar="S", help="with --requeue: only this subscriber's delivery"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON array")


def _usage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--days", type=int, default=31, metavar="N", help="the last N days (default 31)"
    )
    parser.add_argument(
        "--by", choices=("day", "month"), default="day", help="one row per day (default) or month"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object (rows, totals)")


def _setup(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--provider", choices=("openai", "openai_compatible"))
    parser.add_argument("--base-url", metavar="URL", help="openai_compatible: the server's /v1")
    parser.add_argument("--model", metavar="NAME", help="the model id to use by default")
    parser.add_argument(
        "--api-key-env", metavar="VAR", help="the environment variable (or .env name) of the key"
    )
    parser.add_argument(
        "--local-model",
        action="store_true",
        help="install a local model, offline (llama.cpp + a small model, ~1.2 GB) and use it",
    )
    parser.add_argument(
        "--yes", action="store_true", help="with --local-model: download without asking (scripts)"
    )


def _new_extension(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="the extension id (and directory name)")
    parser.add_argument("--tool", action="store_true", help="a tool the model can call (default)")
    parser.add_argument("--channel", action="store_true", help="a channel that reaches the user")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--isolated",
        action="store_true",
        help="run it in its own sandboxed process (isolation: process; the default)",
    )
    where.add_argument(
        "--inprocess",
        action="store_true",
        help="run it inside the kernel (isolation: inprocess; needs a grant after each edit)",
    )
    parser.add_argument(
        "--wasm", action="store_true", help="a WebAssembly tool (isolation: wasm, guest.wat)"
    )


def _replay(parser: argparse.ArgumentParser) -> None:
    """``--list | SESSION [--turn N] [--json] | --export SESSION FILE | --trace FILE``."""
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="one recorded conversation per line")
    what.add_argument(
        "session", nargs="?", metavar="SESSION", help="conversation id (or workflow:RUN) to replay"
    )
    what.add_argument(
        "--export", nargs=2, metavar=("SESSION", "FILE"), help="write a self-contained trace"
    )
    what.add_argument("--trace", metavar="FILE", help="replay a trace file (no journal needed)")
    parser.add_argument("--turn", type=int, metavar="N", help="replay turns 1 to N only")
    parser.add_argument("--json", action="store_true", help="the report as one JSON object")


def _skills(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON array, one object each")
    actions = parser.add_subparsers(dest="skills_command", metavar="ACTION")
    check = actions.add_parser("check", parents=[common], help="validate a skill folder")
    check.add_argument("path", metavar="PATH", help="a skill folder, or a folder of them")
