"""TeX → SVG in a child process that can be timed out and killed (issue 21).

ziamath's layout is pure Python and grows exponentially with nesting: the depth limit (``math.MAX_SVG_NESTING``)
refuses one deep formula at once, but 20 sibling groups 10 deep (1,441 characters) still took 11 s, on a worker
thread nothing can stop — a few of them exhausted the thread pool. Here each SVG is typeset by one long-lived
child (``python -m sidecar.render.mathworker``, or ``<binary> math-worker``), one formula at a time over JSON
lines. A formula that takes longer than :data:`MATH_SVG_TIMEOUT_S` is ``MATH_RENDER_FAILED`` (504) and a
cancelled request (the caller gave up, an export was cancelled) ends the same way: the child's process group is
killed and the next formula starts a new one. The child gets :func:`~sidecar.core.childenv.scrubbed_environ`
and leaves when the sidecar does (stdin EOF, or its parent changes after a SIGKILL).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from sidecar.core.childenv import scrubbed_environ

from .errors import MathParseFailed, MathRenderTimeout

logger = logging.getLogger(__name__)

MATH_SVG_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 64 * 1024 * 1024


def worker_argv() -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, "math-worker"]
    return [sys.executable, "-m", "sidecar.render.mathworker"]


class MathWorker:
    """The sidecar's side: one child, one formula at a time, killed on timeout or cancel and started again."""

    def __init__(self, children: Any = None, *, timeout_s: float = MATH_SVG_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._children = children
        self._lock = anyio.Lock()
        self._process: Process | None = None
        self._stdout: BufferedByteReceiveStream | None = None
        self.started = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def svg(self, source: str, theme: str) -> tuple[str, list[str]]:
        async with self._lock:
            try:
                with anyio.fail_after(self.timeout_s):
                    answer = await self._ask({"source": source, "theme": theme})
            except TimeoutError:
                await self._kill()
                raise MathRenderTimeout(
                    f"The formula took longer than {self.timeout_s:g} s to typeset as SVG; simplify it or use MathML.",
                    details={"timeout_s": self.timeout_s},
                ) from None
            except BaseException:  # cancelled, or the child broke: the formula may still be running there
                await self._kill()
                raise
        if "error" in answer:
            raise MathParseFailed(str(answer["error"].get("message", "The TeX could not be typeset.")))
        return str(answer["svg"]), [str(w) for w in answer.get("warnings", [])]

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        process, stdout = await self._ensure()
        assert process.stdin is not None
        await process.stdin.send((json.dumps(request) + "\n").encode("utf-8"))
        line = await stdout.receive_until(b"\n", MAX_ANSWER_BYTES)
        return json.loads(line)

    async def _ensure(self) -> tuple[Process, BufferedByteReceiveStream]:
        if self._process is not None and self._process.returncode is None and self._stdout is not None:
            return self._process, self._stdout
        await self._kill()
        env = scrubbed_environ()
        env["PYTHONUNBUFFERED"] = "1"
        pipe = subprocess.PIPE
        if self._children is not None:
            process = await self._children.spawn(worker_argv(), name="math-worker", env=env, stdin=pipe, stdout=pipe)
        else:
            process = await anyio.open_process(
                worker_argv(), env=env, start_new_session=True, stdin=pipe, stdout=pipe, stderr=None
            )
        assert process.stdout is not None
        self._process, self._stdout = process, BufferedByteReceiveStream(process.stdout)
        self.started += 1
        return process, self._stdout

    async def _kill(self) -> None:
        process, self._process, self._stdout = self._process, None, None
        if process is None:
            return
        with anyio.CancelScope(shield=True):
            if self._children is not None:
                await self._children.stop(process.pid, grace_s=0.0)
            else:
                with contextlib.suppress(OSError):
                    os.killpg(process.pid, signal.SIGKILL)
                with anyio.move_on_after(2):
                    await process.wait()
            with contextlib.suppress(Exception):
                await process.aclose()

    async def aclose(self) -> None:
        async with self._lock:
            await self._kill()


def main() -> None:
    """The child: one JSON request per stdin line, one answer per stdout line, until EOF."""
    from sidecar.workers.io import claim_stdout, exit_with_parent

    proto = claim_stdout()
    exit_with_parent(lambda: os._exit(3))
    from sidecar.core.errors import SidecarError

    from .math import tex_to_svg

    for line in sys.stdin:
        try:
            request = json.loads(line)
            svg, warnings = tex_to_svg(str(request["source"]), str(request.get("theme", "light")))
            answer: dict[str, Any] = {"svg": svg, "warnings": warnings}
        except SidecarError as exc:
            answer = {"error": {"code": exc.code, "message": exc.message}}
        except Exception as exc:
            answer = {
                "error": {
                    "code": "MATH_PARSE_FAILED",
                    "message": f"The TeX could not be typeset ({type(exc).__name__}).",
                }
            }
        proto.write(json.dumps(answer) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
