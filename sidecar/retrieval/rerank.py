"""The optional rerank stage of hybrid search (``profile.rerank``).

Nothing like a cross-encoder ships in a package that runs offline here, so the stage is a small, explainable
scorer over the ``rerank_candidates`` best RRF candidates: the exact cosine between the query and the block
(also for candidates that only full-text search found) plus a bonus for the share of the query's terms the
block contains (Latin words, CJK character bigrams), which rewards blocks that answer with the query's own
words. A :class:`Reranker` is a seam: a real cross-encoder can replace it without touching search.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[^\W\d_]{2,}|\d+", re.UNICODE)
_STOP = frozenset(
    "the a an and or of to in on at for is are was were be by with what which who how when where why do does did "
    "this that these those it its from as about into".split()
)


def terms(text: str) -> set[str]:
    """Latin words (lower-cased, stop words dropped) and CJK character bigrams (a lone CJK char as itself)."""
    lowered = text.lower()
    out: set[str] = set()
    for run in _CJK_RUN.findall(lowered):
        if len(run) == 1:
            out.add(run)
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    for word in _WORD.findall(_CJK_RUN.sub(" ", lowered)):
        if word not in _STOP:
            out.add(word)
    return out


@dataclass(frozen=True, slots=True)
class Candidate:
    block_id: str
    text: str
    vector: np.ndarray | None


class Reranker(Protocol):
    name: str

    def scores(self, query: str, query_vector: np.ndarray | None, candidates: Sequence[Candidate]) -> list[float]:
        """One score per candidate (higher is better). Blocking; call off the loop."""
        ...


class CosineTermReranker:
    name = "cosine-terms-v1"

    def __init__(self, term_weight: float = 0.35) -> None:
        self.term_weight = term_weight

    def scores(self, query: str, query_vector: np.ndarray | None, candidates: Sequence[Candidate]) -> list[float]:
        q_terms = terms(query)
        out: list[float] = []
        for cand in candidates:
            cosine = 0.0
            if query_vector is not None and cand.vector is not None:
                cosine = float(np.dot(query_vector, cand.vector))
            coverage = len(q_terms & terms(cand.text)) / len(q_terms) if q_terms else 0.0
            out.append(cosine + self.term_weight * coverage)
        return out
