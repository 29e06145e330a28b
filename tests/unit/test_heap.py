"""A kernel's threads share two malloc arenas (``core/runtime/heap.py``): what one
thread frees serves the others, instead of staying resident in an arena of its own.
Counted with glibc's ``malloc_info`` in a process of its own (the limit is global)."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="malloc arenas are glibc's"
)

ARENAS_OF_EIGHT_THREADS = textwrap.dedent(
    """
    import ctypes, re, sys, tempfile, threading
    sys.path.insert(0, sys.argv[1])
    from core.runtime.heap import limit_arenas
    if sys.argv[2] == "limited":
        limit_arenas()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.fopen.restype = ctypes.c_void_p
    barrier = threading.Barrier(8)
    def work():
        barrier.wait()  # all at once: each would want an arena of its own
        libc.malloc(1000)
        barrier.wait()
    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with tempfile.NamedTemporaryFile() as out:
        stream = libc.fopen(out.name.encode(), b"w")
        libc.malloc_info(0, ctypes.c_void_p(stream))
        libc.fclose(ctypes.c_void_p(stream))
        print(len(re.findall(r"<heap nr=", open(out.name).read())))
    """
)


def arenas(mode: str) -> int:
    root = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(
        [sys.executable, "-c", ARENAS_OF_EIGHT_THREADS, root, mode],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return int(out.stdout)


def test_the_kernels_threads_share_two_malloc_arenas() -> None:
    assert arenas("limited") == 2
    assert arenas("default") > 2  # what the limit changes
