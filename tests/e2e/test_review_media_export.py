"""Review of the transcription (media/*) and export (exports/*) domains over real stdio: regressions for the bugs
the adversarial review found. One sidecar for the module."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

TERMINAL = ("completed", "failed", "cancelled")


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    data = tmp_path_factory.mktemp("review-me") / "data"
    data.mkdir()
    sidecar = Sidecar(data)
    try:
        sidecar.initialize()
        yield sidecar
    finally:
        sidecar.close()


def _wait_export(sc: Sidecar, job_id: str, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = sc.result("exports/get", {"job_id": job_id}, timeout=timeout)
        if job["status"] in TERMINAL or time.monotonic() > deadline:
            return job
        time.sleep(0.05)


def test_a_huge_heading_does_not_freeze_the_sidecar(sc: Sidecar) -> None:
    """The download name was cut from the first heading one character at a time on the event loop: a 100k-char
    CJK heading froze every request (ping) for seconds; a 2 MiB one for minutes."""
    markdown = "# " + "长" * 300_000 + "\n\nbody\n"
    job = sc.result("exports/create", {"source": {"type": "markdown", "markdown": markdown}, "format": "html"})
    worst = 0.0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        sc.result("ping", {}, timeout=120)
        view = sc.result("exports/get", {"job_id": job["job_id"]}, timeout=120)
        worst = max(worst, time.monotonic() - t0)
        if view["status"] in TERMINAL:
            break
    assert view["status"] == "completed", view
    assert view["file"]["file_name"] == "长" * 50 + ".html"
    assert worst < 1.0, f"ping + get took {worst:.2f} s while the export ran"
