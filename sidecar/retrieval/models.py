"""Retrieval wire types: search params/results, index status (phase-2 §9.9), configure and rebuild params."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from sidecar.core.common import Params, Phase2Model
from sidecar.knowledge.models import BlockKind, Citation

SearchMode = Literal["fts", "vector", "hybrid"]
RebuildScope = Literal["vectors", "fts", "all"]
EmbedderKind = Literal["default", "hash-v1", "openai-compatible", "ollama"]


class SearchFilters(Params):
    note_ids: list[str] | None = Field(None, max_length=1000, description="Only blocks of these notes.")
    folder: str | None = Field(None, max_length=500, description="Only notes in this folder or its subfolders.")


class SearchParams(Params):
    query: str = Field(min_length=1, max_length=4000)
    mode: SearchMode = "hybrid"
    profile_id: str | None = Field(None, max_length=100)
    top_k: int | None = Field(None, ge=1, le=100, description="Default: the profile's context_top_k.")
    filters: SearchFilters | None = None

    @model_validator(mode="after")
    def _not_blank(self) -> SearchParams:
        if not self.query.strip():
            raise ValueError("query must not be blank")
        return self


class RankDetails(Phase2Model):
    """Where the hit stood in each stage (1-based ranks; ``null`` where a stage did not see it)."""

    fts_rank: int | None = None
    fts_score: float | None = None
    vector_rank: int | None = None
    vector_score: float | None = None
    rrf_score: float | None = None
    rerank_score: float | None = None


class SearchHit(Phase2Model):
    note_id: str
    note_title: str
    folder: str | None
    block_id: str
    position: int
    kind: BlockKind
    text: str
    score: float
    ranks: RankDetails
    citations: list[Citation]


class SearchResult(Phase2Model):
    query: str
    mode: SearchMode
    profile_id: str
    items: list[SearchHit]
    duration_ms: float


class EmbedderConfig(Params):
    """Which embedder fills the vector index. ``default``: USE multilingual v3 shipped in a package;
    ``hash-v1``: hashed n-grams (tests, benchmarks); ``openai-compatible`` / ``ollama``: an ``/embeddings``
    endpoint at ``base_url`` (no API key: local servers only; keys belong to the provider settings)."""

    kind: EmbedderKind = "default"
    dimension: int | None = Field(None, ge=8, le=8192, description="hash-v1: vector size (default 128).")
    base_url: str | None = Field(None, max_length=2000)
    model: str | None = Field(None, max_length=200)

    @model_validator(mode="after")
    def _fields_for_kind(self) -> EmbedderConfig:
        remote = self.kind in ("openai-compatible", "ollama")
        if remote and not (self.base_url and self.model):
            raise ValueError("base_url and model are required for a remote embedder")
        if not remote and (self.base_url or self.model):
            raise ValueError("base_url and model are only for remote embedders")
        if self.kind == "default" and self.dimension is not None:
            raise ValueError("the default embedder has a fixed dimension")
        return self


class EmbeddingInfo(Phase2Model):
    model_id: str
    model_version: str
    dimension: int
    normalization: str


class VectorIndexInfo(Phase2Model):
    model_id: str | None
    model_version: str | None = None
    dimension: int | None
    normalization: str | None = None
    compatible: bool
    block_count: int = 0
    pending_blocks: int = 0


class FtsIndexInfo(Phase2Model):
    tokenizer: str
    block_count: int
    pending_blocks: int


class IndexStatus(Phase2Model):
    status: str  # idle | indexing | rebuilding | error
    pending_jobs: int
    active_job_id: str | None
    embedding: EmbeddingInfo
    vector_index: VectorIndexInfo
    fts_index: FtsIndexInfo
    embedder: EmbedderConfig
    last_completed_at: str | None
    error_message: str | None


class IndexConfigureParams(Params):
    embedder: EmbedderConfig


class RebuildParams(Params):
    scope: RebuildScope = "vectors"


class RebuildJobParams(Params):
    job_id: str = Field(min_length=1, max_length=200)
