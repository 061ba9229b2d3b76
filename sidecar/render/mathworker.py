"""TeX → SVG in a child process that can be timed out and killed (issue 21), over the one worker channel.

ziamath's layout is pure Python and grows exponentially with nesting: the depth limit (``math.MAX_SVG_NESTING``)
refuses one deep formula at once, but 20 sibling groups 10 deep (1,441 characters) still took 11 s, on a worker
thread nothing can stop — a few of them exhausted the thread pool. Here each SVG is typeset by one long-lived
child (``python -m sidecar.render.mathworker``, or ``<binary> math-worker``) speaking the worker protocol
(:mod:`sidecar.workers.protocol`): one ``svg`` request at a time, answered with a ``result`` or an ``error``
(``MATH_PARSE_FAILED``). The sidecar's side is a :class:`~sidecar.workers.channel.WorkerChannel`. A formula that
takes longer than :data:`MATH_SVG_TIMEOUT_S` (the child's start included) is ``MATH_RENDER_FAILED`` (504) and a
cancelled request (the caller gave up, an export was cancelled) ends the same way: the child's process group is
killed and the next formula starts a new one. A child that cannot start, breaks the protocol or dies is
``MATH_RENDER_FAILED`` (500). The child gets :func:`~sidecar.workers.env.worker_env` and leaves when the sidecar
does (stdin EOF, or its parent changes after a SIGKILL).
"""

from __future__ import annotations

import os
from typing import Any, TextIO

import anyio
from anyio.abc import TaskGroup

from sidecar.workers import engines
from sidecar.workers.channel import WorkerChannel, WorkerFault
from sidecar.workers.env import worker_env
from sidecar.workers.protocol import Error, WorkerOutput, run_worker, serve_requests
from sidecar.workers.single import SingleChild
from sidecar.workers.supervisor import ChildSupervisor

from .errors import MathParseFailed, MathRenderTimeout, MathWorkerFailed

MATH_SVG_TIMEOUT_S = 10.0
WORKER_NAME = "math worker"
OP_SVG = "svg"
PARSE_FAILED = MathParseFailed.default_code


def _fault(fault: WorkerFault) -> Exception:
    return MathWorkerFailed(
        f"The formula could not be typeset as SVG: {fault.message}.",
        details={"reason": fault.reason, "exit_code": fault.exit_code},
    )


def _error(error: Error) -> Exception:
    return MathParseFailed(error.message or "The TeX could not be typeset.")


class MathWorker(SingleChild):
    """The sidecar's side: one child, one formula at a time, killed on timeout or cancel and started again."""

    def __init__(
        self, children: ChildSupervisor, task_group: TaskGroup, *, timeout_s: float = MATH_SVG_TIMEOUT_S
    ) -> None:
        self.timeout_s = timeout_s
        channel = WorkerChannel(
            children,
            task_group,
            name=WORKER_NAME,
            argv=engines.worker_argv("math-worker"),
            env=lambda: worker_env(os.environ),
            on_fault=_fault,
            on_error=_error,
            hello_timeout_s=timeout_s,
            stop_grace_s=0.0,  # no grace: a runaway layout would only use it up
        )
        super().__init__(channel)

    async def svg(self, source: str, theme: str) -> tuple[str, list[str]]:
        async with self._lock:
            try:
                with anyio.fail_after(self.timeout_s):
                    data = await self._channel.request(OP_SVG, {"source": source, "theme": theme})
            except MathParseFailed:  # the child answered: it stays for the next formula
                raise
            except TimeoutError:
                await self._kill()
                raise MathRenderTimeout(
                    f"The formula took longer than {self.timeout_s:g} s to typeset as SVG; simplify it or use MathML.",
                    details={"timeout_s": self.timeout_s},
                ) from None
            except BaseException:  # cancelled, or the child broke: the formula may still be running there
                await self._kill()
                raise
        return str(data["svg"]), [str(w) for w in data.get("warnings", [])]


# ---- the child ---------------------------------------------------------------------------------------------------


def serve(stdin: TextIO, out: WorkerOutput) -> None:
    """Send the worker's hello once the typesetter is imported, then answer one ``svg`` request at a time until EOF."""
    from .math import tex_to_svg

    def svg(params: dict[str, Any]) -> dict[str, Any]:
        svg, warnings = tex_to_svg(str(params["source"]), str(params.get("theme", "light")))
        return {"svg": svg, "warnings": warnings}

    out.hello("math", os.getpid())
    serve_requests(
        stdin, out, OP_SVG, svg, PARSE_FAILED, lambda exc: f"The TeX could not be typeset ({type(exc).__name__})."
    )


def main() -> None:
    run_worker(serve)


if __name__ == "__main__":
    main()
