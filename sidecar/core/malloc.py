"""At most a few malloc arenas in the long-lived sidecar (glibc): its threads must not each keep a heap.

glibc gives each thread that meets contention its own arena (up to 8 per core), and memory freed in one is kept
for that arena. The sidecar's worker threads (exports, LanceDB, embeddings, SQLite) and the native libraries' own
threads spread its allocations over many arenas, each keeping what it once held: measured with the stdio fuzz
(80,000 lines, ``scripts/fuzz_stdio.py --seed 5``), peak RSS grew 544 → 623 MB over the run with glibc's default,
and 486 → 513 MB with two arenas; no Python object grew (gc counts at 15k and 55k lines were the same).
``MALLOC_ARENA_MAX`` in the environment wins (glibc reads it at start; this then does nothing).
"""

from __future__ import annotations

import os
import sys

MAX_ARENAS = 2
_M_ARENA_MAX = -8  # glibc's malloc.h


def cap_arenas(limit: int = MAX_ARENAS) -> bool:
    """Ask glibc for at most ``limit`` arenas from now on; False where that is not glibc's malloc or it is set."""
    if not sys.platform.startswith("linux") or "MALLOC_ARENA_MAX" in os.environ:
        return False
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl, or no glibc by that name
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, limit))
