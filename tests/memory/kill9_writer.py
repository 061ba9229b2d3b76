"""Child of test_kill9: add memories forever, each superseding the previous one (a two-row commit), and print
each id once ``add`` has returned.

Usage: python kill9_writer.py <data_dir>
"""

from __future__ import annotations

import sys

import anyio

from sidecar.embeddings import HashEmbedder
from sidecar.memory.models import MemoryAddParams
from sidecar.memory.service import MemoryService


async def main(data_dir: str) -> None:
    svc = MemoryService(data_dir, HashEmbedder())
    out = sys.stdout
    previous: list[str] = []
    i = 0
    while True:
        i += 1
        params = MemoryAddParams(content=f"the counter value is {i}", type="semantic", supersedes=previous)
        result = await svc.add(params)
        previous = [result.memory.item.id]
        out.write(result.memory.item.id + "\n")
        if i == 1:
            out.write("ready\n")
        out.flush()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
