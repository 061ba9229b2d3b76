"""A fake worker for the channel tests: ``python fake_worker.py MODE`` speaks sidecar.workers.protocol.

MODE ``ok`` serves requests; ``hang`` never says hello; ``exit`` leaves before its hello; ``noise`` prints a line
that is not a message before its hello; ``oldproto`` says hello in another protocol version. Ops (``ok``):
``echo`` (result: the params), ``stream`` (``n`` deltas, then a result), ``hold`` (a ``held`` progress, then no
answer until ``release`` of the same ``key`` or a cancel), ``release``, ``cancelled`` (the ids cancelled so far),
``env`` (the names of its environment variables), ``fail`` (an error with the params' ``code``), ``garbage``
(a line that is not a message), ``crash`` (a progress, a line on stderr, then exit status 7), ``deaf`` (closes its
stdin, answers, then lives on reading nothing: the next request cannot be written).
"""

from __future__ import annotations

import os
import sys
import time

from sidecar.workers.io import claim_stdout
from sidecar.workers.protocol import Cancel, Hello, WorkerOutput, read_requests


def main(mode: str) -> None:
    proto = claim_stdout()
    if mode == "hang":
        for _ in sys.stdin:  # until EOF (or a kill): no hello ever
            pass
        return
    if mode == "noise":  # a library that printed to the real stdout before the hello
        proto.write("loading weights... done\n")
        proto.flush()
    if mode == "oldproto":
        WorkerOutput(proto).send(Hello(worker="fake", pid=os.getpid(), protocol=0))
    if mode == "exit":
        sys.stderr.write("fake worker: cannot start\n")
        os._exit(5)
    out = WorkerOutput(proto)
    out.hello("fake", os.getpid())
    held: dict[str, str] = {}
    cancelled: list[str] = []
    for message in read_requests(sys.stdin):
        if isinstance(message, Cancel):
            cancelled.append(message.id)
            for key, request_id in list(held.items()):
                if request_id == message.id:
                    del held[key]
                    out.result(request_id, {"cancelled": True})
            continue
        rid, op, params = message.id, message.op, message.params
        if op == "echo":
            out.result(rid, params)
        elif op == "stream":
            for i in range(int(params["n"])):
                out.progress(rid, "streaming", {"i": i})
                out.delta(rid, f"t{i} ")
            out.result(rid, {"n": params["n"]})
        elif op == "hold":
            held[str(params["key"])] = rid
            out.progress(rid, "held", {})
        elif op == "release":
            out.result(held.pop(str(params["key"])), {"value": params["value"]})
            out.result(rid, {})
        elif op == "cancelled":
            out.result(rid, {"ids": cancelled})
        elif op == "env":
            out.result(rid, {"names": sorted(os.environ)})
        elif op == "fail":
            out.error(rid, str(params["code"]), "it failed", {"reason": "FAKE"})
        elif op == "garbage":
            proto.write("this is not a worker message\n")
            proto.flush()
        elif op == "deaf":
            os.close(0)
            out.result(rid, {})
            time.sleep(3600)
        elif op == "crash":
            out.progress(rid, "crashing", {})
            sys.stderr.write("fake worker: boom-marker\n")
            sys.stderr.flush()
            os._exit(7)


if __name__ == "__main__":
    main(sys.argv[1])
