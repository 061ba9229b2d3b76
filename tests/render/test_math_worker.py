"""Issue 21: TeX → SVG typesetting is bounded in time and cancellable (a killable child, not a worker thread)."""

from __future__ import annotations

import os

import anyio
import pytest

from sidecar.core.errors import SidecarError
from sidecar.render.mathworker import MathWorker

pytestmark = pytest.mark.anyio

# the review's formula: 20 sibling groups, each 10 deep (within the nesting limit), 1,441 characters, ~11 s
HEAVY = "".join(r"\sqrt{" * 10 + "x" + "}" * 10 + "+" for _ in range(20)) + "y"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_a_formula_over_the_time_bound_is_a_timeout_and_its_child_is_killed() -> None:
    worker = MathWorker(timeout_s=1.5)
    try:
        svg, _ = await worker.svg(r"\frac{a}{b}", "light")  # warm: the child is up and answers
        assert svg.startswith("<svg")
        pid = worker.pid
        assert pid is not None
        with pytest.raises(SidecarError) as info:
            await worker.svg(HEAVY, "light")
        assert info.value.code == "MATH_RENDER_FAILED" and info.value.status == 504
        assert worker.pid is None and not _alive(pid)
        again, _ = await worker.svg("x^2", "dark")  # a new child for the next formula
        assert again.startswith("<svg") and worker.started == 2
    finally:
        await worker.aclose()


async def test_a_cancelled_render_kills_its_child() -> None:
    worker = MathWorker(timeout_s=60)
    try:
        await worker.svg("x", "light")
        pid = worker.pid
        assert pid is not None
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.svg, HEAVY, "light")
                await anyio.wait_all_tasks_blocked()  # the request is written; the child is typesetting
                scope.cancel()
        assert worker.pid is None and not _alive(pid)
    finally:
        await worker.aclose()


async def test_a_bad_formula_is_a_parse_error_and_keeps_the_child() -> None:
    worker = MathWorker()
    try:
        await worker.svg("x", "light")
        pid = worker.pid
        with pytest.raises(SidecarError) as info:
            await worker.svg(r"\frac{1}{", "light")
        assert info.value.code == "MATH_PARSE_FAILED" and worker.pid == pid and pid is not None and _alive(pid)
        assert os.getpid() != pid
    finally:
        await worker.aclose()
