from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from sidecar.embeddings import Embedder, EmbedderInfo, HashEmbedder
from sidecar.jobs.manager import JobManager
from sidecar.knowledge.service import KnowledgeService
from sidecar.retrieval.embedders import build_embedder
from sidecar.retrieval.models import EmbedderConfig
from sidecar.retrieval.service import RetrievalService
from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog

DATA = Path(__file__).parent / "data" / "bilingual_quality.json"


def quality_set() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


class CountingEmbedder:
    """Wraps an embedder: records every text it embeds; can be held at a gate (to act mid-rebuild)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    @property
    def info(self) -> EmbedderInfo:
        return self.inner.info

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.entered.set()
        if self.gate is not None and len(texts) > 1:  # query embeddings (one text) are never held
            assert self.gate.wait(10), "gate never opened"
        self.texts.extend(texts)
        return self.inner.embed(texts)


@dataclass
class Env:
    data_dir: Path
    db: Database
    jobs: JobManager
    knowledge: KnowledgeService
    retrieval: RetrievalService
    embedders: list[CountingEmbedder] = field(default_factory=list)

    @property
    def embedder(self) -> CountingEmbedder:
        return self.embedders[-1]


@asynccontextmanager
async def open_env(data_dir: Path, config: EmbedderConfig) -> AsyncIterator[Env]:
    db = await Database.open(data_dir)
    embedders: list[CountingEmbedder] = []

    def factory(cfg: EmbedderConfig) -> Embedder:
        inner = HashEmbedder(cfg.dimension or 128) if cfg.kind == "hash-v1" else build_embedder(cfg)
        wrapped = CountingEmbedder(inner)
        embedders.append(wrapped)
        return wrapped

    try:
        async with anyio.create_task_group() as tg:
            jobs = JobManager(db, EventLog(db), tg)
            await jobs.migrate()
            knowledge = KnowledgeService(db, data_dir)
            await knowledge.migrate()
            retrieval = RetrievalService(
                db, data_dir, jobs=jobs, default_embedder=config, embedder_factory=factory, task_group=tg
            )
            await retrieval.start()
            knowledge.add_listener(retrieval.changed)
            try:
                yield Env(data_dir, db, jobs, knowledge, retrieval, embedders)
            finally:
                await jobs.shutdown(5)
                tg.cancel_scope.cancel()
    finally:
        await db.close()


EnvFactory = Callable[..., Any]


@pytest.fixture
def env_factory(data_dir: Path) -> EnvFactory:
    def make(kind: str = "hash-v1", **kw: Any) -> Any:
        return open_env(data_dir, EmbedderConfig(kind=kind, **kw))  # type: ignore[arg-type]

    return make


@pytest.fixture
async def env(env_factory: EnvFactory) -> AsyncIterator[Env]:
    async with env_factory() as e:
        yield e
