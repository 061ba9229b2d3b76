"""Issue 22 over real stdio: exports are parsed and written in one export worker child — started by the first
export, reused by the next, replaced after it is killed, cancelled with its export, and gone with the sidecar."""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.test_export_e2e import _wait
from tests.support.sidecar_proc import Sidecar, worker_pids

pytestmark = pytest.mark.e2e

SLOW = 60.0
DOC = "# 标题 Title\n\nSome `code`.\n\n```python\ndef f(x):\n    return x * 2\n```\n\n| a | b |\n|---|---|\n| 1 |\n"
HEAVY = "\n\n".join(f"## S{i}\n\n*t* `c` [l](https://e.com/{i})\n\n```python\nx = {i}\n```" for i in range(12_000))


def _workers(sc: Sidecar) -> list[int]:
    return worker_pids(sc.proc.pid, "sidecar.export.worker", "export-worker")


def _create(sc: Sidecar, markdown: str) -> str:
    job = sc.result("exports/create", {"source": {"type": "markdown", "markdown": markdown}, "format": "html"})
    return str(job["job_id"])


def _html(sc: Sidecar, markdown: str = DOC) -> bytes:
    job = _wait(sc, _create(sc, markdown))
    assert job["status"] == "completed", job
    part = sc.result("exports/file", {"job_id": job["job_id"], "offset": 0, "length": 1 << 20})
    data = base64.b64decode(part["data_base64"])
    assert part["eof"] and hashlib.sha256(data).hexdigest() == job["file"]["sha256"]
    return data


def _gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_one_export_worker_serves_exports_and_is_replaced_after_a_kill(data_dir: Path) -> None:
    sc = Sidecar(data_dir)
    try:
        sc.initialize()
        assert sc.result("ping") is not None and _workers(sc) == []  # started lazily, by the first export
        first = _html(sc)
        (pid,) = _workers(sc)
        assert _html(sc) == first and _workers(sc) == [pid]  # reused: the same child, the same bytes
        os.kill(pid, signal.SIGKILL)
        assert _gone(pid)
        assert _html(sc) == first  # the next export starts a new child
        (again,) = _workers(sc)
        assert again != pid
        sc.close_stdin()
        assert sc.wait(30) == 0
        assert _gone(again)  # it leaves with the sidecar
    finally:
        sc.close()


def test_a_cancelled_export_stops_its_worker_and_writes_nothing(data_dir: Path) -> None:
    sc = Sidecar(data_dir)
    try:
        sc.initialize()
        _html(sc)
        (pid,) = _workers(sc)
        job_id = _create(sc, HEAVY)
        # the "parse" step is on record once the runner is about to send the document (which takes the child
        # seconds to parse): the cancel reaches a request in flight
        while (sc.result("exports/get", {"job_id": job_id}).get("progress") or {}).get("phase") != "parse":
            time.sleep(0.005)
        assert sc.result("exports/cancel", {"job_id": job_id})["accepted"] is True
        assert _wait(sc, job_id)["status"] == "cancelled"
        assert _gone(pid)  # the child's work was killed with it
        assert not any(job_id in p.name for p in (data_dir / "exports").iterdir())
        assert _html(sc).startswith(b"<!DOCTYPE html>")  # and the next export has a new child
        assert _workers(sc) != [pid]
    finally:
        sc.close()
