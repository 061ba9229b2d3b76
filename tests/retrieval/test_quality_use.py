"""The real embedded model (USE multilingual v3) on the bilingual set: Chinese full-text search finds every
Chinese keyword query's block, and hybrid search reaches the issue's quality bar."""

from __future__ import annotations

import pytest

from sidecar.knowledge.models import BlockInput, CreateNoteParams
from tests.retrieval.conftest import EnvFactory, quality_set

pytestmark = pytest.mark.anyio


async def test_use_fts_vector_hybrid_quality(env_factory: EnvFactory) -> None:
    data = quality_set()
    async with env_factory("default") as env:
        note = await env.knowledge.create_note(
            CreateNoteParams(title="set", blocks=[BlockInput(text=d["text"]) for d in data["docs"]])
        )
        status = await env.retrieval.status()
        assert status.embedding.model_id == "use-multilingual-v3" and status.embedding.dimension == 512
        assert status.vector_index.compatible and status.vector_index.block_count == len(data["docs"])
        doc_of = {b.block_id: data["docs"][i]["id"] for i, b in enumerate(note.blocks)}

        async def ranked(q: str, mode: str) -> list[str]:
            return [doc_of[h.block_id] for h in (await env.retrieval.search(q, mode, top_k=5)).items]  # type: ignore[arg-type]

        chinese = [q for q in data["queries"] if q["lang"] == "zh"]
        assert len(chinese) >= 15
        fts_missed = [q["q"] for q in chinese if q["target"] not in await ranked(q["q"], "fts")]
        assert fts_missed == [], "every Chinese keyword query finds its block by full-text search"
        hybrid_hits = [q["target"] in await ranked(q["q"], "hybrid") for q in data["queries"]]
        assert sum(hybrid_hits) / len(hybrid_hits) >= 0.9
        cross = [q for q in data["queries"] if "->" in q["lang"]]
        cross_missed = [q["q"] for q in cross if (await ranked(q["q"], "vector"))[0] != q["target"]]
        assert len(cross) >= 5 and cross_missed == [], "cross-lingual queries find their block by vectors"
