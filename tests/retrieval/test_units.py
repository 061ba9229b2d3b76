"""Pure parts: the profile, the vector cache, the reranker's terms, the remote embedder (MockTransport)."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
from pydantic import ValidationError

from sidecar.core.errors import SidecarError
from sidecar.retrieval.embedders import RemoteEmbedder, build_embedder
from sidecar.retrieval.models import EmbedderConfig, SearchParams
from sidecar.retrieval.profile import get_profile
from sidecar.retrieval.rerank import Candidate, CosineTermReranker, terms
from sidecar.retrieval.vectors import VectorCache


def test_default_profile_is_the_seed_one() -> None:
    assert get_profile().model_dump() == {
        "profile_id": "default-v2",
        "version": 2,
        "fts_recall": 20,
        "vector_recall": 20,
        "rrf_k": 60,
        "rerank": True,
        "rerank_candidates": 20,
        "context_top_k": 8,
        "score_threshold": 0.0,
    }
    assert get_profile("default-v2") is get_profile(None)
    with pytest.raises(SidecarError) as info:
        get_profile("nope")
    assert info.value.code == "RETRIEVAL_PROFILE_NOT_FOUND" and info.value.status == 404


def test_search_params_validation() -> None:
    for bad in ({"query": ""}, {"query": "   "}, {"query": "x", "mode": "magic"}, {"query": "x", "top_k": 0}):
        with pytest.raises(ValidationError):
            SearchParams.model_validate(bad)
    with pytest.raises(ValidationError):
        SearchParams.model_validate({"query": "x", "filters": {"tag": "a"}})
    for bad_cfg in (
        {"kind": "ollama"},
        {"kind": "hash-v1", "base_url": "http://x"},
        {"kind": "default", "dimension": 8},
    ):
        with pytest.raises(ValidationError):
            EmbedderConfig.model_validate(bad_cfg)


def _unit(rows: list[list[float]]) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_vector_cache_upsert_delete_filter_compact() -> None:
    cache = VectorCache(2, capacity=1)
    cache.upsert(["a", "b", "c"], ["n1", "n1", "n2"], ["ha", "hb", "hc"], _unit([[1, 0], [0, 1], [1, 1]]))
    q = _unit([[1, 0.1]])[0]
    assert [h[0] for h in cache.search(q, 3)] == ["a", "c", "b"]
    assert [h[0] for h in cache.search(q, 3, note_ids=["n2"])] == ["c"]
    cache.upsert(["a"], ["n1"], ["ha2"], _unit([[-1, 0]]))
    assert cache.search(q, 1)[0][:2] == ("c", "hc")
    assert cache.search(q, 3)[-1][:2] == ("a", "ha2")
    cache.delete(["c", "missing"])
    assert [h[0] for h in cache.search(q, 5)] == ["b", "a"]
    assert len(cache) == 2 and cache.vector_of("c") is None
    many = [f"x{i}" for i in range(3000)]
    cache.upsert(many, ["n"] * 3000, ["h"] * 3000, _unit([[1, i / 3000] for i in range(3000)]))
    cache.delete(many[:2500])  # compaction
    assert len(cache) == 502 and cache.search(q, 1)[0][0] in many[2500:]
    assert cache.search(q, 10, note_ids=[]) == []


def test_terms_and_reranker() -> None:
    assert terms("进程调度 the Scheduler!") == {"进程", "程调", "调度", "scheduler"}
    assert terms("猫") == {"猫"}
    r = CosineTermReranker(term_weight=0.5)
    q = np.array([1.0, 0.0], dtype=np.float32)
    cands = [
        Candidate("a", "unrelated words", np.array([0.9, 0.1], dtype=np.float32)),
        Candidate("b", "进程调度", None),
    ]
    scores = r.scores("进程调度", q, cands)
    assert scores[0] == pytest.approx(0.9) and scores[1] == pytest.approx(0.5)


def _transport(kind: str, dim: int, calls: list[dict[str, object]]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append({"url": str(request.url), **body})
        vectors = [[float(len(t)), 1.0] + [0.0] * (dim - 2) for t in body["input"]]
        if kind == "ollama":
            return httpx.Response(200, json={"embeddings": vectors})
        return httpx.Response(200, json={"data": [{"index": i, "embedding": v} for i, v in enumerate(vectors)]})

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(("kind", "path"), [("openai-compatible", "/v1/embeddings"), ("ollama", "/api/embed")])
def test_remote_embedders(kind: str, path: str) -> None:
    calls: list[dict[str, object]] = []
    base = "http://127.0.0.1:11434" + ("/v1" if kind == "openai-compatible" else "")
    cfg = EmbedderConfig(kind=kind, base_url=base, model="nomic-embed-text")  # type: ignore[arg-type]
    emb = build_embedder(cfg, transport=_transport(kind, 4, calls))
    assert isinstance(emb, RemoteEmbedder)
    assert emb.probe() == 4
    out = emb.embed(["ab", "abcd"])
    assert out.shape == (2, 4) and np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert emb.info.model_id == f"{kind}:nomic-embed-text" and emb.info.dimension == 4
    assert emb.info.normalization == "l2"
    assert all(c["url"].endswith(path) and c["model"] == "nomic-embed-text" for c in calls)  # type: ignore[union-attr]


def test_remote_embedder_errors() -> None:
    failing = httpx.MockTransport(lambda r: httpx.Response(500, json={"error": "boom"}))
    emb = RemoteEmbedder("ollama", "http://localhost:1", "m", transport=failing)
    with pytest.raises(SidecarError) as info:
        emb.embed(["x"])
    assert (info.value.status, info.value.code) == (502, "EMBEDDER_FAILED")

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    down = RemoteEmbedder("ollama", "http://localhost:1", "m", transport=httpx.MockTransport(refuse))
    with pytest.raises(SidecarError) as info:
        down.probe()
    assert info.value.code == "EMBEDDER_UNAVAILABLE"
    with pytest.raises(SidecarError) as info:
        RemoteEmbedder("ollama", "file:///etc", "m")
    assert info.value.code == "EMBEDDER_CONFIG_INVALID"


def _clustered(n: int, dim: int, centers: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centers, dim)).astype(np.float32)
    x = c[rng.integers(0, centers, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_ivf_layout_keeps_results_close_to_exact_and_follows_writes() -> None:
    x = _clustered(6000, 32, 40, seed=1)
    ids = [f"b{i}" for i in range(len(x))]
    cache = VectorCache(32, ivf_min_rows=2000)
    cache.upsert(ids, [f"n{i % 50}" for i in range(len(x))], ["h"] * len(x), x)
    assert cache.wait_layout(30) and cache.indexed
    queries = _clustered(50, 32, 40, seed=2)
    recall = [
        len({h[0] for h in cache.search(q, 10)} & {h[0] for h in cache.search(q, 10, exact=True)}) / 10 for q in queries
    ]
    assert sum(recall) / len(recall) >= 0.9
    # writes after the layout: a changed vector moves to the delta, a deleted row disappears
    q = queries[0]
    cache.upsert(["b0"], ["n0"], ["h2"], q[None, :])
    top = cache.search(q, 1)[0]
    assert top[:2] == ("b0", "h2") and top[2] == pytest.approx(1.0, abs=1e-5)
    cache.delete(["b0"])
    assert all(h[0] != "b0" for h in cache.search(q, 20))
    # a narrow filter scans exactly, so nothing of the note is lost to an unprobed cluster
    got = cache.search(q, 1000, note_ids=["n7"])
    assert sorted(h[0] for h in got) == sorted(f"b{i}" for i in range(7, 6000, 50))
    cache.delete(ids[: len(ids) * 3 // 4])  # compaction keeps the layout usable
    left = cache.search(q, 5000, exact=True)
    assert len(left) == len(ids) - len(ids) * 3 // 4
    assert {h[0] for h in cache.search(q, 5)} <= {h[0] for h in left}


@pytest.mark.parametrize(
    "embeddings",
    [
        [["a", "b"]],  # not numbers
        [[1.0, 2.0], [1.0]],  # ragged
        [[]],  # no dimension
        [7],  # not a vector
        [[float("nan"), 1.0]],  # json.loads takes NaN; the wire answer could not carry it
    ],
)
def test_a_malformed_embeddings_body_is_an_upstream_error(embeddings: list[object]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = '{"embeddings": ' + str(embeddings).replace("'", '"').replace("nan", "NaN") + "}"
        return httpx.Response(200, content=body.encode(), headers={"content-type": "application/json"})

    emb = RemoteEmbedder("ollama", "http://localhost:1", "m", transport=httpx.MockTransport(handler))
    with pytest.raises(SidecarError) as info:
        emb.embed(["x"] * len(embeddings))
    assert (info.value.status, info.value.code) == (502, "EMBEDDER_FAILED")
    fixed = RemoteEmbedder("ollama", "http://localhost:1", "m", 2, transport=httpx.MockTransport(handler))
    with pytest.raises(SidecarError) as info:
        fixed.embed(["x"] * len(embeddings))
    assert (info.value.status, info.value.code) == (502, "EMBEDDER_FAILED")
