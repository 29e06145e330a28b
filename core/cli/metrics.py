"""``main.py metrics``: print the kernel's metrics in the Prometheus text format.

A running kernel's live numbers when ``metrics.listen`` is set and it answers
there; else the snapshot the kernel writes to ``<data>/metrics.prom`` (every
``metrics.snapshot_interval_s`` while it runs, and at stop). Where they came
from goes to stderr, so stdout is the exposition alone.
"""

from __future__ import annotations

import sys

from core.config import Settings
from core.metrics.snapshot import SNAPSHOT_FILE, fetch_live, read_snapshot


def run_metrics(settings: Settings) -> int:
    listen = settings.metrics.listen
    if listen is not None:
        live = fetch_live(listen)
        if live is not None:
            print(f"metrics of the kernel serving http://{listen}/metrics", file=sys.stderr)
            sys.stdout.write(live.decode("utf-8"))
            return 0
    snapshot = read_snapshot(settings.data_dir)
    path = settings.data_dir / SNAPSHOT_FILE
    if snapshot is None:
        where = f"no kernel answers on {listen}, and " if listen else ""
        print(f"hearth: {where}no snapshot at {path} yet: start the kernel", file=sys.stderr)
        return 1
    data, age_s = snapshot
    print(f"metrics snapshot {path}, written {age_s:.0f} s ago", file=sys.stderr)
    sys.stdout.write(data.decode("utf-8"))
    return 0
