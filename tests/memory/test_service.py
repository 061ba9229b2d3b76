"""MemoryService mechanics over a real LanceDB table (HashEmbedder: fast and deterministic).

These tests call the service directly (not the RPC layer): the wire shape is covered by
tests/e2e/test_memory_e2e.py, and here time and ids are injected.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from sidecar.core.errors import BadRequestError, NotFoundError
from sidecar.embeddings import HashEmbedder
from sidecar.memory.models import (
    MAX_EPOCH_MS,
    MemoryAddParams,
    MemoryCompactParams,
    MemoryDeleteParams,
    MemoryListParams,
    MemorySearchParams,
)
from sidecar.memory.service import DAY_MS, MemoryService

from .conftest import T0, Clock

pytestmark = pytest.mark.anyio


async def add(svc: MemoryService, content: str, type: str = "semantic", **kw: Any) -> str:
    result = await svc.add(MemoryAddParams(content=content, type=type, **kw))  # type: ignore[arg-type]
    return result.memory.item.id


def wire(model: Any) -> Any:
    if isinstance(model, list):
        return [wire(m) for m in model]
    return model.model_dump(mode="json", by_alias=True)


async def test_add_then_get_round_trip(hashed: MemoryService) -> None:
    result = await hashed.add(
        MemoryAddParams(content="The user prefers dark mode", type="semantic", summary="dark mode", importance=0.8)
    )
    assert result.superseded == []
    assert wire(result.memory) == {
        "item": {
            "id": "mem_0001",
            "type": "semantic",
            "content": "The user prefers dark mode",
            "summary": "dark mode",
            "source": "user_input",
            "importance": 0.8,
            "createdAt": T0,
        },
        "status": "active",
        "superseded_by": None,
        "superseded_at": None,
        "supersedes": [],
        "merged_from": [],
    }
    assert wire(await hashed.get("mem_0001")) == wire(result.memory)


async def test_get_unknown_is_not_found(hashed: MemoryService) -> None:
    with pytest.raises(NotFoundError) as exc:
        await hashed.get("mem_nope")
    assert exc.value.status == 404 and exc.value.code == "MEMORY_NOT_FOUND"


async def test_expiry_rules(hashed: MemoryService, clock: Clock) -> None:
    working = await hashed.add(MemoryAddParams(content="draft the report", type="working"))
    assert working.memory.item.expires_at == T0 + DAY_MS  # working memory defaults to 24 h
    ttl = await hashed.add(MemoryAddParams(content="call back", type="episodic", ttl_ms=1000))
    assert ttl.memory.item.expires_at == T0 + 1000
    forever = await hashed.add(MemoryAddParams(content="name is Ada", type="semantic"))
    assert forever.memory.item.expires_at is None
    with pytest.raises(BadRequestError) as exc:
        await hashed.add(MemoryAddParams(content="x", type="episodic", expires_at=T0))
    assert exc.value.status == 400 and exc.value.code == "INVALID_EXPIRY"
    with pytest.raises(ValidationError):
        MemoryAddParams(content="x", type="episodic", expires_at=T0 + 5, ttl_ms=5)
    with pytest.raises(ValidationError):
        MemoryAddParams(content="x", type="procedural")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        MemoryAddParams(content="x", type="episodic", importance=1.5)


async def test_an_expiry_beyond_the_representable_range_is_a_validation_error(hashed: MemoryService) -> None:
    """Unix ms past int64 (or a TTL that pushes now past it) used to fail deep in Arrow: a -32603."""
    for kw in ({"expires_at": 2**63}, {"ttl_ms": 2**63 - 1}, {"expires_at": MAX_EPOCH_MS + 1}):
        with pytest.raises(ValidationError):
            MemoryAddParams(content="x", type="episodic", **kw)  # type: ignore[arg-type]
    far = await hashed.add(MemoryAddParams(content="x", type="episodic", ttl_ms=MAX_EPOCH_MS))
    assert far.memory.item.expires_at == T0 + MAX_EPOCH_MS
    assert (await hashed.get(far.memory.item.id)).status == "active"


async def test_expired_memories_are_never_searched_and_hidden_from_list(hashed: MemoryService, clock: Clock) -> None:
    short = await add(hashed, "the parking spot is B12", "episodic", ttl_ms=60_000)
    await add(hashed, "the parking garage closes at ten", "episodic")
    clock.advance(60_000)
    search = await hashed.search(MemorySearchParams(query="parking spot B12", include_superseded=True))
    assert short not in [h.item.id for h in search.items] and len(search.items) == 1
    listed = await hashed.list(MemoryListParams())
    assert [r.item.id for r in listed.items] == ["mem_0002"]
    with_expired = await hashed.list(MemoryListParams(include_expired=True))
    assert [(r.item.id, r.status) for r in with_expired.items] == [("mem_0002", "active"), (short, "expired")]
    assert (await hashed.get(short)).status == "expired"


async def test_filters_by_type_and_session(hashed: MemoryService) -> None:
    g = await add(hashed, "tea facts global", "semantic")
    s1 = await add(hashed, "tea facts session one", "episodic", session_id="s1")
    s2 = await add(hashed, "tea facts session two", "episodic", session_id="s2")

    async def ids(**kw: Any) -> set[str]:
        found = await hashed.search(MemorySearchParams(query="tea facts", **kw))
        listed = await hashed.list(MemoryListParams(**kw))
        assert {h.item.id for h in found.items} == {r.item.id for r in listed.items}
        return {h.item.id for h in found.items}

    assert await ids() == {g, s1, s2}
    assert await ids(session_id="s1") == {g, s1}
    assert await ids(session_id="s1", include_global=False) == {s1}
    assert await ids(types=["episodic"]) == {s1, s2}
    assert await ids(types=["semantic"], session_id="s2") == {g}
    assert await ids(session_id="it's") == {g}  # quotes in values are escaped


async def test_list_pages_newest_first(hashed: MemoryService, clock: Clock) -> None:
    for i in range(5):
        await add(hashed, f"fact number {i}", "semantic")
        clock.advance(1)
    first = await hashed.list(MemoryListParams(limit=2))
    second = await hashed.list(MemoryListParams(limit=2, offset=2))
    last = await hashed.list(MemoryListParams(limit=2, offset=4))
    assert [r.item.content for r in first.items] == ["fact number 4", "fact number 3"]
    assert [r.item.content for r in second.items] == ["fact number 2", "fact number 1"]
    assert [r.item.content for r in last.items] == ["fact number 0"]
    assert wire(first.page) == {"total": 5, "limit": 2, "offset": 0}


async def test_explicit_supersession_keeps_the_old_memory_hidden(hashed: MemoryService, clock: Clock) -> None:
    old = await add(hashed, "office wifi password is alpha", "semantic")
    clock.advance(10)
    result = await hashed.add(
        MemoryAddParams(content="office wifi password is bravo", type="semantic", supersedes=[old])
    )
    new = result.memory.item.id
    assert wire(result.superseded) == [{"memory_id": old, "reason": "explicit", "similarity": None}]
    assert result.memory.supersedes == [old]
    stored = await hashed.get(old)
    assert (stored.status, stored.superseded_by) == ("superseded", new)
    assert stored.superseded_at == "2026-09-21T14:13:20.010Z"
    assert stored.item.content == "office wifi password is alpha"  # kept, not rewritten
    found = await hashed.search(MemorySearchParams(query="office wifi password"))
    assert [h.item.id for h in found.items] == [new]
    everything = await hashed.search(MemorySearchParams(query="office wifi password", include_superseded=True))
    assert {h.item.id: h.status for h in everything.items} == {new: "active", old: "superseded"}
    assert [r.item.id for r in (await hashed.list(MemoryListParams())).items] == [new]


async def test_explicit_supersession_of_an_unknown_id_writes_nothing(hashed: MemoryService) -> None:
    known = await add(hashed, "a fact", "semantic")
    with pytest.raises(NotFoundError) as exc:
        await hashed.add(MemoryAddParams(content="b fact", type="semantic", supersedes=[known, "mem_nope"]))
    assert exc.value.details == {"memory_ids": ["mem_nope"]}
    listed = await hashed.list(MemoryListParams(include_superseded=True))
    assert [(r.item.id, r.status) for r in listed.items] == [(known, "active")]


async def test_auto_supersede_can_be_turned_off(hashed: MemoryService) -> None:
    old = await add(hashed, "The meeting is on Monday", "episodic")
    result = await hashed.add(
        MemoryAddParams(content="The meeting is on Friday", type="episodic", auto_supersede=False)
    )
    assert result.superseded == [] and (await hashed.get(old)).status == "active"
    # the same statement with another value is detected when it is on (HashEmbedder similarity is high here)
    detected = await hashed.add(MemoryAddParams(content="The meeting is on Sunday", type="episodic"))
    assert {s.memory_id for s in detected.superseded} == {old, result.memory.item.id}


async def test_delete_and_restore(hashed: MemoryService) -> None:
    old = await add(hashed, "deploy day is Tuesday", "semantic")
    new = await add(hashed, "deploy day is Thursday", "semantic", supersedes=[old])
    with pytest.raises(NotFoundError):
        await hashed.delete(MemoryDeleteParams(memory_id="mem_nope"))
    # delete the correction and undo what it did
    result = await hashed.delete(MemoryDeleteParams(memory_id=new, restore_superseded=True))
    assert wire(result) == {"memory_id": new, "deleted": True, "restored": [old]}
    restored = await hashed.get(old)
    assert (restored.status, restored.superseded_by, restored.superseded_at) == ("active", None, None)
    with pytest.raises(NotFoundError):
        await hashed.get(new)
    # a plain delete leaves what it superseded retired
    newer = await add(hashed, "deploy day is Friday", "semantic", supersedes=[old])
    assert wire(await hashed.delete(MemoryDeleteParams(memory_id=newer)))["restored"] == []
    assert (await hashed.get(old)).status == "superseded"


async def test_ranking_combines_similarity_importance_and_recency(hashed: MemoryService, clock: Clock) -> None:
    old = await add(hashed, "project codename is Falcon", "semantic", importance=0.5, auto_supersede=False)
    clock.advance(60 * DAY_MS)
    fresh = await add(hashed, "project codename is Falcon", "semantic", importance=0.5, auto_supersede=False)
    vital = await add(hashed, "project codename is Falcon", "semantic", importance=1.0, auto_supersede=False)
    other = await add(hashed, "lunch is at noon", "semantic", importance=1.0)
    result = await hashed.search(MemorySearchParams(query="project codename is Falcon", top_k=4))
    ids = [h.item.id for h in result.items]
    assert ids[:3] == [vital, fresh, old]  # equal similarity: importance, then recency decide
    assert ids[3] == other  # an important but unrelated memory stays last
    top = result.items[0]
    assert top.item.relevance_score == top.score_details.score
    assert top.score_details.similarity == pytest.approx(1.0, abs=1e-5)
    assert top.score_details.score == pytest.approx(1.0 * (0.6 + 0.25 * 1.0 + 0.15 * 1.0), abs=1e-5)
    aged = next(h for h in result.items if h.item.id == old)
    assert aged.score_details.recency == pytest.approx(0.25)  # two half-lives
    assert "relevanceScore" not in wire(await hashed.get(old))["item"]  # only in search results
    few = await hashed.search(MemorySearchParams(query="project codename is Falcon", top_k=1, min_similarity=0.99))
    assert [h.item.id for h in few.items] == [vital]


async def test_compact_removes_expired_working_memory_and_merges_duplicates(
    hashed: MemoryService, clock: Clock
) -> None:
    scratch = await add(hashed, "scratch: step 2 of the plan", "working", ttl_ms=1000)
    episode = await add(hashed, "old episode", "episodic", ttl_ms=1000)
    a = await add(hashed, "The user's cat is called Momo", "semantic", importance=0.9, summary="cat Momo")
    clock.advance(5)
    b = await add(hashed, "the user's cat is called Momo!", "semantic", importance=0.3)
    clock.advance(5)
    c = await add(hashed, "The user's cat is called Momo.", "semantic", importance=0.4)
    other_session = await add(hashed, "The user's cat is called Momo", "semantic", session_id="s1")
    fixed = await add(hashed, "wrong cat name", "semantic")
    await add(hashed, "right cat name", "semantic", supersedes=[fixed])
    clock.advance(1000)
    everything = MemoryListParams(include_superseded=True, include_expired=True)
    before = wire(await hashed.list(everything))
    rows_before = before["page"]["total"]

    dry = await hashed.compact(MemoryCompactParams(dry_run=True))
    assert dry.dry_run and dry.expired_removed == [scratch]
    assert wire(dry.merged) == [{"memory_id": c, "merged_from": [b, a]}]
    assert dry.remaining == rows_before - 3
    assert wire(await hashed.list(everything)) == before  # nothing written

    done = await hashed.compact(MemoryCompactParams())
    assert wire(done.merged) == wire(dry.merged) and done.expired_removed == [scratch] and not done.dry_run
    survivor = await hashed.get(c)
    assert survivor.merged_from == [b, a]
    assert survivor.item.importance == 0.9 and survivor.item.summary == "cat Momo"
    assert survivor.item.content == "The user's cat is called Momo."
    for gone in (scratch, a, b):
        with pytest.raises(NotFoundError):
            await hashed.get(gone)
    assert (await hashed.get(episode)).status == "expired"  # only working memory is removed
    assert (await hashed.get(other_session)).status == "active"  # another session is not a duplicate
    assert (await hashed.get(fixed)).status == "superseded"
    assert done.remaining == rows_before - 3
    again = await hashed.compact(MemoryCompactParams())
    assert again.merged == [] and again.expired_removed == []


async def test_compact_repoints_links_to_the_survivor(hashed: MemoryService, clock: Clock) -> None:
    wrong = await add(hashed, "the server runs on port 80", "semantic")
    clock.advance(1)
    fix = await add(hashed, "port setting corrected here", "semantic", supersedes=[wrong])
    clock.advance(1)
    dup = await add(hashed, "Port setting corrected here.", "semantic")
    await hashed.compact(MemoryCompactParams())
    survivor = await hashed.get(dup)
    assert survivor.merged_from == [fix] and survivor.supersedes == [wrong]
    assert (await hashed.get(wrong)).superseded_by == dup


async def test_data_survives_reopening(make_service: Callable[..., MemoryService], tmp_path: Path) -> None:
    first = make_service(HashEmbedder())
    mid = await add(first, "persisted fact", "semantic")
    second = make_service(HashEmbedder())
    assert (await second.get(mid)).item.content == "persisted fact"


@pytest.mark.parametrize("other", [HashEmbedder(dimension=64, model_id="hash-small"), HashEmbedder(model_id="hash-v2")])
async def test_a_new_embedder_re_embeds_the_table(make_service: Callable[..., MemoryService], other: Any) -> None:
    first = make_service(HashEmbedder())
    old = await add(first, "the capital of France is Paris", "semantic")
    new = await add(first, "the capital of France was Paris", "semantic", auto_supersede=False, supersedes=[old])
    second = make_service(other)
    found = await second.search(MemorySearchParams(query="capital of France", include_superseded=True))
    assert {h.item.id: h.status for h in found.items} == {old: "superseded", new: "active"}
    assert found.items[0].score_details.similarity > 0.3  # vectors of the new model, not garbage


async def test_concurrent_adds_all_land(hashed: MemoryService) -> None:
    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(add, hashed, f"parallel note {i} about topic {i * 7}", "episodic")
    assert (await hashed.list(MemoryListParams())).page.total == 20
