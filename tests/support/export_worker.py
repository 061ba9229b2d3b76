"""An export worker (sidecar/export/worker.py) on its own supervisor and task group, stopped on leaving."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

from sidecar.export.worker import ExportWorker
from tests.support.single_child import single_child


def export_worker(argv: Sequence[str] | None = None) -> AbstractAsyncContextManager[ExportWorker]:
    return single_child(lambda children, tg: ExportWorker(children, tg, argv=argv))
