from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sidecar_proc import Sidecar


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def sidecar(data_dir: Path) -> Iterator[Sidecar]:
    """A fresh sidecar process, not yet initialized, with the dev methods on."""
    sc = Sidecar(data_dir)
    try:
        yield sc
    finally:
        sc.close()


@pytest.fixture
def ready(sidecar: Sidecar) -> Sidecar:
    sidecar.initialize()
    return sidecar
