"""Keep the C heap of a long-running Hearth process small.

glibc's ``malloc`` gives each thread that allocates an arena of its own (up to
eight per core) and keeps what is freed there for that arena's later calls. A
kernel runs a dozen threads over its life (asyncio's executor, one per
aiosqlite connection, the libraries'), so megabytes stay resident in arenas
that are mostly free. Two arenas — the main thread's and one the others share
— took the kernel after 40 turns from 153.9 to 150.2 MB (``bench/rss.py``,
every bundled extension, words-only memory), with no change in turn time:
those threads allocate little and seldom at once. ``malloc_trim`` on a timer
gained a further 0.3 MB at most, so the kernel does not run one. Elsewhere
(musl, macOS) there is no such knob and nothing happens.
"""

from __future__ import annotations

import ctypes

__all__ = ["ARENAS", "limit_arenas"]

ARENAS = 2
M_ARENA_MAX = -8  # mallopt's parameter, from glibc's malloc.h


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most ``arenas`` malloc arenas from now on: call it before threads start (an
    arena a thread already has stays its own). False where the C library has no such
    knob. The process's own symbols are asked (``CDLL(None)``), not a library found
    by name: ``find_library`` runs ``ldconfig``, which a sandboxed process may lack."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))
