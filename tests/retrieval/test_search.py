"""Search over notes with the hash-v1 embedder: modes, rank details, filters, incremental indexing, staleness."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest

from sidecar.core.errors import SidecarError
from sidecar.knowledge.models import BlockInput, Citation, CreateNoteParams, UpdateNoteParams
from sidecar.retrieval.profile import get_profile
from sidecar.retrieval.service import RetrievalService
from tests.retrieval.conftest import Env, EnvFactory

pytestmark = pytest.mark.anyio

OS_NOTE = (
    "# 进程调度\n\n操作系统通过进程调度算法分配 CPU 时间。\n\n- 先来先服务\n- 时间片轮转\n\n"
    "The scheduler picks the next process."
)
DB_NOTE = "# Databases\n\nWe are migrating the database from MySQL to PostgreSQL.\n\n数据库迁移计划在下个月完成。"


async def _ids(r: RetrievalService, q: str, mode: str = "hybrid", **kw: object) -> list[str]:
    return [h.block_id for h in (await r.search(q, mode, **kw)).items]  # type: ignore[arg-type]


async def test_every_mode_finds_chinese_and_english(env: Env) -> None:
    os_note = await env.knowledge.create_note(CreateNoteParams(title="OS", folder="课程", content=OS_NOTE))
    db_note = await env.knowledge.create_note(CreateNoteParams(title="DB", folder="work", content=DB_NOTE))
    sched = os_note.blocks[1].block_id
    for mode in ("fts", "vector", "hybrid"):
        assert sched in (await _ids(env.retrieval, "进程调度算法", mode))[:2], mode
        assert db_note.blocks[1].block_id in (await _ids(env.retrieval, "PostgreSQL", mode))[:2], mode
        assert db_note.blocks[2].block_id in (await _ids(env.retrieval, "数据库迁移", mode))[:2], mode
    res = await env.retrieval.search("进程调度", "hybrid")
    top = res.items[0]
    assert res.profile_id == "default-v2" and res.mode == "hybrid" and res.duration_ms >= 0
    assert top.note_id == os_note.note_id and top.note_title == "OS" and top.folder == "课程"
    r = top.ranks
    assert r.fts_rank is not None and r.vector_rank is not None and r.rerank_score == top.score
    assert r.rrf_score == pytest.approx(1 / (60 + r.fts_rank) + 1 / (60 + r.vector_rank))
    fts_only = (await env.retrieval.search("进程调度", "fts")).items[0]
    assert fts_only.ranks.vector_rank is None and fts_only.ranks.rrf_score is None
    assert fts_only.score == fts_only.ranks.fts_score
    plain = get_profile().model_copy(update={"rerank": False})
    unranked = (await env.retrieval.search("进程调度", "hybrid", plain)).items[0]
    assert unranked.ranks.rerank_score is None and unranked.score == unranked.ranks.rrf_score


async def test_top_k_filters_and_citations(env: Env) -> None:
    cite = Citation(start_time=1.5, end_time=3.0, speaker="SPEAKER_01")
    a = await env.knowledge.create_note(
        CreateNoteParams(
            title="a", folder="课程/操作系统", blocks=[BlockInput(text="进程调度 第一讲", citations=[cite])]
        )
    )
    b = await env.knowledge.create_note(CreateNoteParams(title="b", folder="课程/数学", content="进程调度 第二讲"))
    c = await env.knowledge.create_note(CreateNoteParams(title="c", content="进程调度 第三讲"))
    assert len(await _ids(env.retrieval, "进程调度", "fts", top_k=2)) == 2
    hits = (await env.retrieval.search("进程调度", "hybrid", filters={"folder": "课程/操作系统"})).items  # type: ignore[arg-type]
    assert [h.note_id for h in hits] == [a.note_id] and hits[0].citations == [cite]
    for mode in ("fts", "vector", "hybrid"):
        got = (await env.retrieval.search("进程调度", mode, filters={"note_ids": [b.note_id, c.note_id]})).items  # type: ignore[arg-type]
        assert {h.note_id for h in got} == {b.note_id, c.note_id}, mode
    empty = await env.retrieval.search("进程调度", "hybrid", filters={"folder": "nowhere"})  # type: ignore[arg-type]
    assert empty.items == []
    with pytest.raises(SidecarError) as info:
        await env.retrieval.search("x", "fts", "no-such-profile")
    assert (info.value.status, info.value.code) == (404, "RETRIEVAL_PROFILE_NOT_FOUND")


async def test_only_changed_blocks_are_reembedded_and_deletes_leave_the_index(env: Env) -> None:
    note = await env.knowledge.create_note(
        CreateNoteParams(title="t", content="alpha block\n\nbeta block\n\ngamma block")
    )
    assert sorted(env.embedder.texts) == ["alpha block", "beta block", "gamma block"]
    env.embedder.texts.clear()
    await env.knowledge.update_note(
        UpdateNoteParams(note_id=note.note_id, content="alpha block\n\nbeta block, edited\n\ngamma block\n\ndelta")
    )
    assert sorted(env.embedder.texts) == ["beta block, edited", "delta"]
    env.embedder.texts.clear()
    await env.knowledge.update_note(UpdateNoteParams(note_id=note.note_id, title="renamed only"))
    assert env.embedder.texts == []
    assert await _ids(env.retrieval, "beta", "fts") == [note.blocks[1].block_id]
    status = await env.retrieval.status()
    assert status.fts_index.block_count == 4 and status.vector_index.block_count == 4
    await env.knowledge.delete_note(note.note_id)
    for mode in ("fts", "vector", "hybrid"):
        assert await _ids(env.retrieval, "alpha block", mode) == [], mode
    status = await env.retrieval.status()
    assert (status.fts_index.block_count, status.vector_index.block_count) == (0, 0)
    assert (status.fts_index.pending_blocks, status.vector_index.pending_blocks) == (0, 0)


async def test_stale_index_rows_are_never_returned_and_catch_up_repairs(env: Env) -> None:
    """Bypasses the service to change a block's text without re-indexing: what a crash between the SQLite
    commit and the index write leaves behind."""
    note = await env.knowledge.create_note(CreateNoteParams(title="t", content="服务器宕机的原因"))
    bid = note.blocks[0].block_id
    assert await _ids(env.retrieval, "宕机", "fts") == [bid]

    def edit(conn: object) -> None:
        conn.execute(  # type: ignore[attr-defined]
            "UPDATE kn_blocks SET text = '数据库迁移完成', text_hash = 'changed' WHERE block_id = ?", (bid,)
        )

    await env.db.run(edit)
    for mode in ("fts", "vector", "hybrid"):
        assert await _ids(env.retrieval, "宕机", mode) == [], f"{mode}: old text must not come back"
    assert (await env.retrieval.status()).fts_index.pending_blocks == 1
    await env.retrieval.catch_up()
    assert await _ids(env.retrieval, "数据库迁移", "fts") == [bid]
    assert await _ids(env.retrieval, "宕机", "fts") == []


async def test_index_survives_restart(env_factory: EnvFactory) -> None:
    async with env_factory() as env:
        note = await env.knowledge.create_note(
            CreateNoteParams(title="t", content="光合作用\n\nphotosynthesis in leaves")
        )
    async with env_factory() as env:
        for mode in ("fts", "vector", "hybrid"):
            assert note.blocks[0].block_id in await _ids(env.retrieval, "光合作用", mode), mode
        assert set(env.embedder.texts) == {"光合作用"}, "only queries were embedded: vectors came from LanceDB"
        status = await env.retrieval.status()
        assert status.status == "idle" and status.vector_index.compatible and status.vector_index.block_count == 2


async def test_a_write_committed_while_the_vector_cache_loads_is_not_lost(env: Env) -> None:
    """The in-memory vector cache loads on the first vector query; a block indexed while it loads (after the
    load read the table) must still be searchable afterwards, not missing until a restart."""
    await env.knowledge.create_note(CreateNoteParams(title="a", content="光合作用"))
    store = env.retrieval._state.store
    real_load = store.load_vectors
    read_done, release = threading.Event(), threading.Event()

    def held_load(name: str) -> Any:  # reads the table, then waits until the write below has committed
        out = real_load(name)
        read_done.set()
        assert release.wait(10)
        return out

    store.load_vectors = held_load  # type: ignore[method-assign]
    async with anyio.create_task_group() as tg:
        tg.start_soon(env.retrieval.search, "光合作用", "vector")
        assert await anyio.to_thread.run_sync(read_done.wait, 10)
        b = await env.knowledge.create_note(CreateNoteParams(title="b", content="photosynthesis in leaves"))
        release.set()
    store.load_vectors = real_load  # type: ignore[method-assign]
    for mode in ("vector", "hybrid"):
        assert b.blocks[0].block_id in await _ids(env.retrieval, "photosynthesis in leaves", mode), mode


async def test_hybrid_honours_a_top_k_above_the_profile_recall(env: Env) -> None:
    prof = get_profile()
    n = prof.rerank_candidates + prof.fts_recall // 2 + 5  # more than the profile's hybrid depths
    for i in range(n):
        await env.knowledge.create_note(CreateNoteParams(title=f"n{i}", content=f"光合作用 第{i}讲"))
    for mode in ("fts", "vector", "hybrid"):
        hits = (await env.retrieval.search("光合作用", mode, top_k=n)).items  # type: ignore[arg-type]
        assert len(hits) == n, mode
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True), mode
    plain = prof.model_copy(update={"rerank": False})
    assert len((await env.retrieval.search("光合作用", "hybrid", plain, top_k=n)).items) == n


async def test_a_huge_block_is_embedded_from_its_head_and_fully_searchable(env: Env) -> None:
    """A pasted log without blank lines is one block of megabytes: the whole of it goes to the embedder
    (~54 s per MB with USE, and over a remote endpoint's input limit, failing the batch on every retry)."""
    from sidecar.retrieval.state import EMBED_MAX_CHARS

    content = "进程调度 process scheduling. " * 40_000 + "光合作用"
    note = await env.knowledge.create_note(CreateNoteParams(title="log", content=content))
    assert len(note.blocks) == 1 and len(note.blocks[0].text) > 10 * EMBED_MAX_CHARS
    assert env.embedder.texts and max(len(t) for t in env.embedder.texts) <= EMBED_MAX_CHARS
    for mode in ("vector", "hybrid"):
        assert await _ids(env.retrieval, "进程调度 process scheduling", mode) == [note.blocks[0].block_id], mode
    assert await _ids(env.retrieval, "光合作用", "fts") == [note.blocks[0].block_id], "full text is indexed whole"


async def test_a_root_folder_filter_means_every_note_as_in_notes_list(env: Env) -> None:
    a = await env.knowledge.create_note(CreateNoteParams(title="a", folder="课程", content="光合作用 第一讲"))
    b = await env.knowledge.create_note(CreateNoteParams(title="b", content="光合作用 第二讲"))
    assert (await env.knowledge.list_notes(folder="/")).page.total == 2
    for folder in ("", "/", " / "):
        for mode in ("fts", "vector", "hybrid"):
            hits = (await env.retrieval.search("光合作用", mode, filters={"folder": folder})).items  # type: ignore[arg-type]
            assert {h.note_id for h in hits} == {a.note_id, b.note_id}, (folder, mode)
    only_b = {"folder": "/", "note_ids": [b.note_id]}
    assert {h.note_id for h in (await env.retrieval.search("光合作用", "fts", filters=only_b)).items} == {b.note_id}


async def test_a_first_sync_of_many_batches_leaves_every_row_in_the_keyword_index(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyword index is built on the first batch so the rest can be searched meanwhile; rows left outside it
    are scored on their own statistics, so a block's rank would depend on where the batches split (a paper's
    sentence came second to a heading on one machine, first on another). The sync ends with every row indexed."""
    from sidecar.retrieval import indexer

    monkeypatch.setattr(indexer, "SYNC_BATCH", 4)
    blocks = [BlockInput(text=f"paragraph {i} about rivers and lakes") for i in range(10)]
    await env.knowledge.create_note(CreateNoteParams(title="many", blocks=blocks))
    state = env.retrieval._state
    table = state.store._open(state.meta["fts_table"])
    (name,) = [ix.name for ix in table.list_indices() if ix.index_type == "FTS"]
    stats = table.index_stats(name)
    assert (stats.num_indexed_rows, stats.num_unindexed_rows) == (10, 0)
