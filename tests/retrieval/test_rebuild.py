"""Embedder switch → INDEX_MODEL_MISMATCH; the rebuild job: progress, atomic swap, cancel, concurrent edits."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest

from sidecar.core.errors import SidecarError
from sidecar.jobs import JobStatus
from sidecar.knowledge.models import CreateNoteParams
from sidecar.retrieval.models import EmbedderConfig
from sidecar.retrieval.store import IndexStore
from tests.retrieval.conftest import Env

pytestmark = pytest.mark.anyio


async def _code(coro: object) -> tuple[int, str]:
    with pytest.raises(SidecarError) as info:
        await coro  # type: ignore[misc]
    return info.value.status, info.value.code


def _tables(env: Env) -> set[str]:
    return set(IndexStore(env.data_dir).table_names())


async def test_mismatch_then_rebuild(env: Env) -> None:
    note = await env.knowledge.create_note(CreateNoteParams(title="t", content="进程调度\n\nprocess scheduling"))
    before = await env.retrieval.status()
    assert before.vector_index.model_dump(include={"model_id", "dimension", "compatible"}) == {
        "model_id": "hash-v1",
        "dimension": 128,
        "compatible": True,
    }
    status = await env.retrieval.configure(EmbedderConfig(kind="hash-v1", dimension=64))
    assert status.embedding.dimension == 64 and status.vector_index.dimension == 128
    assert status.vector_index.compatible is False
    for mode in ("vector", "hybrid"):
        assert await _code(env.retrieval.search("进程调度", mode)) == (409, "INDEX_MODEL_MISMATCH")  # type: ignore[arg-type]
    assert [h.block_id for h in (await env.retrieval.search("进程调度", "fts")).items] == [note.blocks[0].block_id]
    # edits while mismatched still reach full-text search, and never the old vector table
    extra = await env.knowledge.create_note(CreateNoteParams(title="u", content="光合作用"))
    assert [h.block_id for h in (await env.retrieval.search("光合作用", "fts")).items] == [extra.blocks[0].block_id]
    assert (await env.retrieval.status()).vector_index.pending_blocks == 1

    old_tables = _tables(env)
    job = await env.retrieval.rebuild("vectors")
    assert job.status is JobStatus.QUEUED
    done = await env.jobs.wait(job.job_id)
    assert done.status is JobStatus.COMPLETED, done.error
    assert done.result is not None and done.result["vectors"]["blocks"] == 3
    events = [e.event for e in (await env.jobs.events(job.job_id)).items]
    assert events[0] == "Queued" and "Progress" in events and events[-1] == "Completed"
    after = await env.retrieval.status()
    assert after.vector_index.compatible and after.vector_index.dimension == 64 and after.last_completed_at
    assert after.vector_index.block_count == 3 and after.vector_index.pending_blocks == 0
    for mode in ("vector", "hybrid"):
        got = [h.block_id for h in (await env.retrieval.search("光合作用", mode)).items]  # type: ignore[arg-type]
        assert got[0] == extra.blocks[0].block_id, mode
    new_tables = _tables(env)
    assert len(new_tables) == len(old_tables) and new_tables != old_tables, "old vector table dropped"


async def test_empty_index_adopts_a_new_embedder_at_once(env: Env) -> None:
    status = await env.retrieval.configure(EmbedderConfig(kind="hash-v1", dimension=32))
    assert status.vector_index.compatible and status.embedder.dimension == 32
    note = await env.knowledge.create_note(CreateNoteParams(title="t", content="hello world"))
    assert (await env.retrieval.search("hello", "vector")).items[0].block_id == note.blocks[0].block_id
    assert (await env.retrieval.status()).vector_index.dimension == 32


async def test_edits_during_a_rebuild_land_in_the_new_table(env: Env) -> None:
    first = await env.knowledge.create_note(CreateNoteParams(title="a", content="alpha one\n\nalpha two"))
    gate = threading.Event()
    env.embedder.gate = gate
    env.embedder.entered.clear()
    job = await env.retrieval.rebuild("all")
    with anyio.fail_after(10):
        await anyio.to_thread.run_sync(env.embedder.entered.wait)
    assert (await env.retrieval.status()).status == "rebuilding"
    assert await _code(env.retrieval.rebuild("vectors")) == (409, "INDEX_REBUILD_IN_PROGRESS")
    # meanwhile: searches use the old tables; an edit is indexed there (single text: not held at the gate)
    late = await env.knowledge.create_note(CreateNoteParams(title="b", content="beta late"))
    during = await env.retrieval.search("alpha one", "vector")
    assert during.items[0].block_id == first.blocks[0].block_id
    await env.knowledge.delete_note(first.note_id)
    gate.set()
    done = await env.jobs.wait(job.job_id)
    assert done.status is JobStatus.COMPLETED, done.error
    for mode in ("fts", "vector", "hybrid"):
        got = [h.block_id for h in (await env.retrieval.search("beta late", mode)).items]  # type: ignore[arg-type]
        assert got == [late.blocks[0].block_id], mode
        gone = {h.block_id for h in (await env.retrieval.search("alpha one", mode)).items}  # type: ignore[arg-type]
        assert not gone & {b.block_id for b in first.blocks}, mode
    assert len(_tables(env)) == 2


async def test_cancel_keeps_the_old_index(env: Env) -> None:
    note = await env.knowledge.create_note(CreateNoteParams(title="a", content="gamma one\n\ngamma two"))
    tables = _tables(env)
    gate = threading.Event()
    env.embedder.gate = gate
    env.embedder.entered.clear()
    job = await env.retrieval.rebuild("vectors")
    with anyio.fail_after(10):
        await anyio.to_thread.run_sync(env.embedder.entered.wait)
    assert (await env.jobs.cancel(job.job_id)).accepted
    gate.set()
    done = await env.jobs.wait(job.job_id)
    assert done.status is JobStatus.CANCELLED
    assert _tables(env) == tables, "the half-built table is dropped"
    assert (await env.retrieval.search("gamma one", "vector")).items[0].block_id == note.blocks[0].block_id
    status = await env.retrieval.status()
    assert status.status == "idle" and status.active_job_id is None and status.pending_jobs == 0


async def test_embedder_switch_during_rebuild_fails_it_without_mixing(env: Env) -> None:
    await env.knowledge.create_note(CreateNoteParams(title="a", content="delta one\n\ndelta two"))
    gate = threading.Event()
    env.embedder.gate = gate
    env.embedder.entered.clear()
    job = await env.retrieval.rebuild("vectors")
    with anyio.fail_after(10):
        await anyio.to_thread.run_sync(env.embedder.entered.wait)
    await env.retrieval.configure(EmbedderConfig(kind="hash-v1", dimension=48))
    gate.set()
    done = await env.jobs.wait(job.job_id)
    assert done.status is JobStatus.FAILED and done.error is not None and done.error.code == "INDEX_MODEL_MISMATCH"
    status = await env.retrieval.status()
    assert status.vector_index.dimension == 128 and not status.vector_index.compatible
    assert await _code(env.retrieval.search("delta", "vector")) == (409, "INDEX_MODEL_MISMATCH")


async def test_orphaned_tables_are_dropped_on_first_write(env: Env) -> None:
    """Creates a table directly, as a rebuild killed before its swap leaves one."""
    await env.knowledge.create_note(CreateNoteParams(title="a", content="x"))
    store = IndexStore(env.data_dir)
    await anyio.to_thread.run_sync(store.create, "kb_vec_orphan000000", "vec", 8)
    env.retrieval._state.store_checked = False  # what a fresh process starts with
    await env.knowledge.create_note(CreateNoteParams(title="b", content="y"))
    assert "kb_vec_orphan000000" not in _tables(env)


async def test_a_cancelled_note_request_is_still_indexed(env: Env) -> None:
    gate = threading.Event()
    env.embedder.gate = gate
    env.embedder.entered.clear()
    created: list[str] = []

    async def create() -> None:
        note = await env.knowledge.create_note(CreateNoteParams(title="t", content="epsilon one\n\nepsilon two"))
        created.append(note.note_id)

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(create)
            with anyio.fail_after(10):
                await anyio.to_thread.run_sync(env.embedder.entered.wait)
            scope.cancel()  # the caller gives up while the vectors are being computed
            gate.set()
    assert created == [], "the request was cancelled"
    assert (await env.knowledge.list_notes()).page.total == 1, "but the note was committed"
    with anyio.fail_after(10):  # the background sync catches up without any further change
        await env.retrieval.wait_background()
    assert (await env.retrieval.status()).vector_index.pending_blocks == 0
    assert len((await env.retrieval.search("epsilon one", "vector")).items) == 2


@pytest.mark.parametrize(
    ("mode", "scope", "method"), [("fts", "fts", "fts_search"), ("vector", "vectors", "load_vectors")]
)
async def test_a_search_that_read_the_old_table_survives_the_swap(env: Env, mode: str, scope: str, method: str) -> None:
    """A query that picked the active table's name just before a rebuild swapped it (and dropped the old
    table) reaches LanceDB after the drop: it must answer from the new table, not fail with -32603."""
    note = await env.knowledge.create_note(CreateNoteParams(title="a", content="光合作用"))
    store = env.retrieval._state.store
    real = getattr(store, method)
    entered, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def held(name: str, *args: Any) -> Any:
        calls.append(name)
        if len(calls) == 1:  # the first call waits until the rebuild dropped its table
            entered.set()
            assert release.wait(10)
        return real(name, *args)

    setattr(store, method, held)
    found: list[list[str]] = []

    async def search() -> None:
        found.append([h.block_id for h in (await env.retrieval.search("光合作用", mode)).items])  # type: ignore[arg-type]

    async with anyio.create_task_group() as tg:
        tg.start_soon(search)
        assert await anyio.to_thread.run_sync(entered.wait, 10)
        done = await env.jobs.wait((await env.retrieval.rebuild(scope)).job_id)  # type: ignore[arg-type]
        assert done.status is JobStatus.COMPLETED, done.error
        assert calls[0] not in _tables(env), "the old table is gone"
        release.set()
    assert found == [[note.blocks[0].block_id]]


async def test_an_embedder_switch_in_the_middle_of_a_search_never_mixes_models(env: Env) -> None:
    """index/configure lands after a vector search checked compatibility, before it embedded the query: the
    query must still be embedded by the model that built the index (here 128-d vs the new 64-d)."""
    note = await env.knowledge.create_note(CreateNoteParams(title="a", content="光合作用\n\nphotosynthesis"))
    real = env.retrieval._searcher._filter_note_ids
    switched = False

    async def switch_first(filters: Any) -> Any:
        nonlocal switched
        if not switched:
            switched = True
            await env.retrieval.configure(EmbedderConfig(kind="hash-v1", dimension=64))
        return await real(filters)

    env.retrieval._searcher._filter_note_ids = switch_first  # type: ignore[method-assign]
    hits = (await env.retrieval.search("光合作用", "vector")).items
    assert switched and hits[0].block_id == note.blocks[0].block_id
    assert await _code(env.retrieval.search("光合作用", "vector")) == (409, "INDEX_MODEL_MISMATCH")


async def test_an_unexpected_rebuild_failure_is_typed_with_an_incident(
    env: Env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 21: it ended as the generic JOB_FAILED with empty details, so the user learnt nothing."""
    await env.knowledge.create_note(CreateNoteParams(title="a", content="kappa one"))

    def broken(*args: Any) -> None:
        raise RuntimeError("disk on fire at /home/someone/private")

    monkeypatch.setattr(env.retrieval._state.store, "create", broken)
    job = await env.retrieval.rebuild("all")
    done = await env.jobs.wait(job.job_id)
    assert done.status is JobStatus.FAILED and done.error is not None
    assert done.error.code == "INDEX_REBUILD_FAILED"
    incident = done.error.details["incident"]
    assert done.error.details == {"exception": "RuntimeError", "incident": incident}
    assert incident in done.error.message and "private" not in done.error.message
    assert any(incident in r.getMessage() and r.exc_info for r in caplog.records)
    failed = (await env.jobs.events(job.job_id)).items[-1]
    assert failed.event == "Failed" and failed.data["error"]["code"] == "INDEX_REBUILD_FAILED"
    monkeypatch.undo()
    again = await env.jobs.wait((await env.retrieval.rebuild("all")).job_id)  # not left "in progress"
    assert again.status is JobStatus.COMPLETED, again.error
