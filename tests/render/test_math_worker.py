"""Issue 21: TeX → SVG typesetting is bounded in time and cancellable (a killable child, not a worker thread)."""

from __future__ import annotations

import os
import signal

import anyio
import pytest

from sidecar.core.errors import SidecarError
from tests.support.math_worker import math_worker
from tests.support.single_child import alive

pytestmark = pytest.mark.anyio

# the review's formula: 20 sibling groups, each 10 deep (within the nesting limit), 1,441 characters, ~11 s
HEAVY = "".join(r"\sqrt{" * 10 + "x" + "}" * 10 + "+" for _ in range(20)) + "y"


async def test_a_formula_over_the_time_bound_is_a_timeout_and_its_child_is_killed() -> None:
    # The bound covers a child's start too; the starts get a generous one, so that a loaded machine (a start took
    # over 1.5 s at load 6) cannot fail the warm-up or the restart, and only the heavy formula meets 1.5 s.
    async with math_worker(timeout_s=60) as worker:
        svg, _ = await worker.svg(r"\frac{a}{b}", "light")  # warm: the child is up and answers
        assert svg.startswith("<svg")
        pid = worker.pid
        assert pid is not None
        worker.timeout_s = 1.5
        with pytest.raises(SidecarError) as info:
            await worker.svg(HEAVY, "light")
        assert info.value.code == "MATH_RENDER_FAILED" and info.value.status == 504
        assert worker.pid is None and not alive(pid)
        worker.timeout_s = 60
        again, _ = await worker.svg("x^2", "dark")  # a new child for the next formula
        assert again.startswith("<svg") and worker.started == 2


async def test_a_cancelled_render_kills_its_child() -> None:
    async with math_worker(timeout_s=60) as worker:
        await worker.svg("x", "light")
        pid = worker.pid
        assert pid is not None
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(worker.svg, HEAVY, "light")
                await anyio.wait_all_tasks_blocked()  # the request is written; the child is typesetting
                scope.cancel()
        assert worker.pid is None and not alive(pid)


async def test_a_bad_formula_is_a_parse_error_and_keeps_the_child() -> None:
    async with math_worker() as worker:
        await worker.svg("x", "light")
        pid = worker.pid
        with pytest.raises(SidecarError) as info:
            await worker.svg(r"\frac{1}{", "light")
        assert info.value.code == "MATH_PARSE_FAILED" and worker.pid == pid and pid is not None and alive(pid)
        assert os.getpid() != pid


async def test_a_child_that_dies_mid_formula_is_a_render_failure_and_the_next_formula_gets_a_new_one() -> None:
    async with math_worker(timeout_s=60) as worker:
        await worker.svg("x", "light")
        pid = worker.pid
        assert pid is not None

        failures: list[SidecarError] = []

        async def render() -> None:
            try:
                await worker.svg(HEAVY, "light")
            except SidecarError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(render)
            await anyio.wait_all_tasks_blocked()  # the request is written; the child is typesetting
            os.kill(pid, signal.SIGKILL)
        [error] = failures
        assert (error.code, error.status) == ("MATH_RENDER_FAILED", 500)
        assert error.details["reason"] == "WORKER_DIED" and error.details["exit_code"] == -signal.SIGKILL
        again, _ = await worker.svg("x^2", "dark")
        assert again.startswith("<svg") and worker.started == 2 and worker.pid != pid
