"""Supersession and retrieval with the real default embedder (USE multilingual v3), Chinese and English."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.ir.memory import MetonaMemoryItem
from sidecar.memory.models import MemoryAddParams, MemoryListParams, MemorySearchParams
from sidecar.memory.service import MemoryService

from .conftest import Clock

pytestmark = pytest.mark.anyio


async def add(svc: MemoryService, content: str, type: str = "semantic", **kw: Any) -> tuple[str, list[tuple[str, str]]]:
    result = await svc.add(MemoryAddParams(content=content, type=type, **kw))  # type: ignore[arg-type]
    return result.memory.item.id, [(s.memory_id, s.reason) for s in result.superseded]


BACKGROUND = [
    "我住在北京",
    "我喜欢喝咖啡",
    "我的生日是5月3日",
    "项目评审会定在周三下午",
    "My favourite editor is Vim",
    "I live in Berlin",
    "The user's dog is called Rex",
    "I like jazz music",
]

# (new memory, the background memory it supersedes or None, reason)
CORRECTIONS = [
    ("更正：我现在住在上海", "我住在北京", "changed_value"),
    ("不对，我的生日是6月8日", "我的生日是5月3日", "changed_value"),
    ("我不再喜欢喝咖啡了", "我喜欢喝咖啡", "correction"),
    ("其实项目评审会改到周五上午了", "项目评审会定在周三下午", "correction"),
    ("Actually, my favourite editor is now Emacs", "My favourite editor is Vim", "changed_value"),
    ("I no longer live in Berlin, I moved to Paris", "I live in Berlin", "correction"),
    ("Correction: the user's dog is called Max", "The user's dog is called Rex", "changed_value"),
    ("I don't like jazz music", "I like jazz music", "negation"),
]

NOT_CORRECTIONS = [
    "我喜欢喝茶",  # another preference, not a corrected one
    "北京的冬天很冷",  # about Beijing, not about where I live
    "我的猫叫小白",
    "I like classical music too",
    "Berlin has excellent museums",
    "My favourite browser is Firefox",  # another subject
    "我喜欢喝咖啡。",  # a duplicate is not a correction (compact merges it)
]


@pytest.fixture
async def seeded(real: MemoryService, clock: Clock) -> tuple[MemoryService, dict[str, str]]:
    ids = {}
    for text in BACKGROUND:
        ids[text], superseded = await add(real, text)
        assert superseded == [], text
        clock.advance(1000)
    return real, ids


async def test_corrections_supersede_the_old_fact(seeded: tuple[MemoryService, dict[str, str]]) -> None:
    """One store, every correction in turn (each corrects a different background fact)."""
    svc, ids = seeded
    for new, old, reason in CORRECTIONS:
        new_id, superseded = await add(svc, new)
        assert superseded == [(ids[old], reason)], new
        old_record = await svc.get(ids[old])
        assert (old_record.status, old_record.superseded_by) == ("superseded", new_id), new
        # the corrected fact is what search answers now; the wrong one only on request
        found = [h.item.id for h in (await svc.search(MemorySearchParams(query=old, top_k=3))).items]
        assert ids[old] not in found and new_id in found, new
        audit = await svc.search(MemorySearchParams(query=old, top_k=3, include_superseded=True))
        assert ids[old] in [h.item.id for h in audit.items], new
    listed = await svc.list(MemoryListParams())
    assert {r.item.content for r in listed.items} == {new for new, _old, _reason in CORRECTIONS}


async def test_related_statements_supersede_nothing(seeded: tuple[MemoryService, dict[str, str]]) -> None:
    svc, _ids = seeded
    for new in NOT_CORRECTIONS:
        _new_id, superseded = await add(svc, new)
        assert superseded == [], new
    assert (await svc.list(MemoryListParams())).page.total == len(BACKGROUND) + len(NOT_CORRECTIONS)


async def test_corrections_stay_inside_their_type_and_session(real: MemoryService) -> None:
    episodic, _ = await add(real, "我住在北京", "episodic", session_id="s1")
    global_fact, _ = await add(real, "我住在北京", "semantic")
    _new, superseded = await add(real, "更正：我现在住在上海", "episodic", session_id="s2")
    assert superseded == []
    _new, superseded = await add(real, "更正：我现在住在上海", "episodic", session_id="s1")
    assert superseded == [(episodic, "changed_value")]
    assert (await real.get(global_fact)).status == "active"


async def test_search_is_multilingual_and_ranked(seeded: tuple[MemoryService, dict[str, str]]) -> None:
    svc, ids = seeded
    zh = await svc.search(MemorySearchParams(query="用户什么时候过生日？", top_k=3))
    assert zh.items[0].item.id == ids["我的生日是5月3日"]
    en_to_zh = await svc.search(MemorySearchParams(query="When is the project review meeting?", top_k=3))
    assert en_to_zh.items[0].item.id == ids["项目评审会定在周三下午"]
    zh_to_en = await svc.search(MemorySearchParams(query="用户用什么文本编辑器", top_k=3))
    assert zh_to_en.items[0].item.id == ids["My favourite editor is Vim"]
    scores = [h.item.relevance_score for h in zh.items]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


async def test_relevant_memories_for_the_context_builder(real: MemoryService, clock: Clock) -> None:
    own, _ = await add(real, "这次会话里我们在讨论数据库迁移到 PostgreSQL", "episodic", session_id="s1")
    other, _ = await add(real, "另一个会话在讨论数据库迁移到 MySQL", "episodic", session_id="s2")
    fact, _ = await add(real, "The user is a backend engineer who works with databases", "semantic")
    unrelated, _ = await add(real, "我喜欢周末去爬山", "semantic")
    items = await real.relevant_memories("数据库迁移计划", "s1", 5)
    assert all(isinstance(i, MetonaMemoryItem) and i.relevance_score is not None for i in items)
    ids = [i.id for i in items]
    assert ids[0] == own and fact in ids
    assert other not in ids and unrelated not in ids  # another session; below the relevance floor
    assert await real.relevant_memories("数据库迁移计划", "s1", 1) == items[:1]
    assert await real.relevant_memories("  ", "s1", 5) == []
    # the wire form is the IR item, camelCase, relevanceScore included
    assert set(items[0].model_dump(mode="json")) == {
        "id",
        "type",
        "content",
        "source",
        "importance",
        "relevanceScore",
        "sessionId",
        "createdAt",
    }


# same frame ("I use …", "I work at …"), another fact: measured similarities 0.44-0.55 with USE, while the true
# corrections above score 0.69 and more (hence FRAME_MIN_SIMILARITY = 0.6)
SAME_FRAME_OTHER_FACT = [
    ("I use Python for work", "I use Vim for editing"),
    ("I use a Mac at work", "I use Windows at home"),
    ("I work at Google", "I work at home on Fridays"),
]


@pytest.mark.parametrize(("old", "new"), SAME_FRAME_OTHER_FACT)
async def test_a_statement_in_the_same_frame_about_another_fact_supersedes_nothing(
    real: MemoryService, clock: Clock, old: str, new: str
) -> None:
    await add(real, old)
    clock.advance(1000)
    _new_id, superseded = await add(real, new)
    assert superseded == [], (old, new)
