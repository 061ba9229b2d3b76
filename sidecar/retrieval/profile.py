"""The RetrievalProfile (phase-2 §9.9): one set of retrieval parameters, shared by ``search/query``, the
agent's knowledge tool and the RAG benchmark, so none of them hard-codes its own."""

from __future__ import annotations

from pydantic import Field

from sidecar.core.common import Phase2Model
from sidecar.core.errors import NotFoundError

DEFAULT_PROFILE_ID = "default-v2"


class RetrievalProfile(Phase2Model):
    profile_id: str
    version: int
    fts_recall: int = Field(ge=1, le=1000)
    vector_recall: int = Field(ge=1, le=1000)
    rrf_k: int = Field(ge=1)
    rerank: bool
    rerank_candidates: int = Field(ge=1, le=1000)
    context_top_k: int = Field(ge=1, le=1000)
    score_threshold: float


PROFILES: dict[str, RetrievalProfile] = {
    DEFAULT_PROFILE_ID: RetrievalProfile(
        profile_id=DEFAULT_PROFILE_ID,
        version=2,
        fts_recall=20,
        vector_recall=20,
        rrf_k=60,
        rerank=True,
        rerank_candidates=20,
        context_top_k=8,
        score_threshold=0.0,
    ),
}


def get_profile(profile_id: str | None = None) -> RetrievalProfile:
    """The profile ``profile_id`` (default ``default-v2``); 404 RETRIEVAL_PROFILE_NOT_FOUND if unknown."""
    pid = profile_id or DEFAULT_PROFILE_ID
    try:
        return PROFILES[pid]
    except KeyError:
        raise NotFoundError(
            "Retrieval profile was not found.", code="RETRIEVAL_PROFILE_NOT_FOUND", details={"profile_id": pid}
        ) from None


def list_profiles() -> list[RetrievalProfile]:
    return list(PROFILES.values())
