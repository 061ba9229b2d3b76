"""Retrieval over the Knowledge Core's blocks: a LanceDB full-text index (ICU tokenizer, Chinese and
English), vectors from the configured embedder, hybrid search with RRF and an optional rerank stage, all
driven by one :class:`RetrievalProfile` (phase-2 §9.9) that search, the agent's knowledge tool and the
benchmarks share (:func:`get_profile`, :meth:`RetrievalService.search`)."""

from .profile import DEFAULT_PROFILE_ID, RetrievalProfile, get_profile

__all__ = ["DEFAULT_PROFILE_ID", "RetrievalProfile", "get_profile"]
