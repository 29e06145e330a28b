"""The arguments of ``main.py replay`` (SPEC §10), apart from the command: building
the parser must not load the kernel (``main.py --help``, ``main.py metrics``)."""

from __future__ import annotations

import argparse

__all__ = ["add_replay_arguments"]


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """``--list | SESSION [--turn N] [--json] | --export SESSION FILE | --trace FILE``."""
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--list", action="store_true", help="one recorded conversation per line")
    what.add_argument("session", nargs="?", metavar="SESSION", help="conversation id to replay")
    what.add_argument(
        "--export", nargs=2, metavar=("SESSION", "FILE"), help="write a self-contained trace"
    )
    what.add_argument("--trace", metavar="FILE", help="replay a trace file (no journal needed)")
    parser.add_argument("--turn", type=int, metavar="N", help="replay turns 1 to N only")
    parser.add_argument("--json", action="store_true", help="the report as one JSON object")
