"""Child of test_durability: append events forever, print each sequence once its commit returned.

Usage: python kill9_writer.py <data_dir> <resource_id>
"""

from __future__ import annotations

import sys

import anyio

from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog


async def main(data_dir: str, resource_id: str) -> None:
    db = await Database.open(data_dir)
    log = EventLog(db)
    await log.create_resource(resource_id, "durability", exist_ok=True)
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    i = 0
    while True:
        i += 1
        if i % 4 == 0:
            batch = [("Progress", {"i": i, "k": k, "pad": "x" * 300}) for k in range(25)]
            events = await log.append_many(resource_id, batch)
            out.write("".join(f"{ev.sequence}\n" for ev in events))
        else:
            ev = await log.append(resource_id, "Progress", {"i": i, "pad": "y" * 300})
            out.write(f"{ev.sequence}\n")
        out.flush()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
