"""A math worker (sidecar/render/mathworker.py) on its own supervisor and task group, stopped on leaving."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from sidecar.render.mathworker import MATH_SVG_TIMEOUT_S, MathWorker
from tests.support.single_child import single_child


def math_worker(timeout_s: float = MATH_SVG_TIMEOUT_S) -> AbstractAsyncContextManager[MathWorker]:
    return single_child(lambda children, tg: MathWorker(children, tg, timeout_s=timeout_s))
