from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from sidecar.embeddings import Embedder, HashEmbedder, default_embedder
from sidecar.memory.service import MemoryService

T0 = 1_790_000_000_000  # a fixed "now" (Unix ms)


class Clock:
    """An injected clock: tests move time explicitly instead of sleeping."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_service(tmp_path: Path, clock: Clock) -> Callable[..., MemoryService]:
    counter = itertools.count(1)

    def make(embedder: Embedder | None = None, data_dir: Path | None = None) -> MemoryService:
        return MemoryService(
            data_dir or tmp_path / "data",
            embedder or HashEmbedder(),
            clock=clock,
            new_id=lambda: f"mem_{next(counter):04d}",
        )

    return make


@pytest.fixture
def hashed(make_service: Callable[..., MemoryService]) -> MemoryService:
    """Deterministic and fast: for mechanics (filters, paging, expiry, provenance), not for meaning."""
    return make_service(HashEmbedder())


@pytest.fixture(scope="session")
def use_embedder() -> Embedder:
    """The real default model (USE multilingual v3): for everything that depends on meaning."""
    return default_embedder()


@pytest.fixture
def real(make_service: Callable[..., MemoryService], use_embedder: Embedder) -> MemoryService:
    return make_service(use_embedder)
