"""Knowledge Core and retrieval over real stdio: attachments, notes in Chinese and English, every search mode,
embedder switch → INDEX_MODEL_MISMATCH → rebuild job → search again, restart, and kill -9 mid-indexing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

SLOW = 120.0


def _events_until(sc: Sidecar, subscription_id: str, terminal: set[str]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while True:
        msg = sc.next(SLOW)
        if (
            isinstance(msg, dict)
            and msg.get("method") == "event"
            and msg["params"]["subscription_id"] == subscription_id
        ):
            events.append(msg["params"])
            if msg["params"]["event"] in terminal:
                return events


def _search(sc: Sidecar, query: str, mode: str, **kw: Any) -> list[dict[str, Any]]:
    return sc.result("search/query", {"query": query, "mode": mode, **kw}, timeout=SLOW)["items"]


def test_knowledge_round_trip(sidecar: Sidecar, data_dir: Path, tmp_path: Path) -> None:
    sc = sidecar
    sc.initialize()
    audio = tmp_path / "lecture.mp3"
    audio.write_bytes(b"ID3" + bytes(2048))
    att = sc.result("attachments/import", {"path": str(audio)})
    assert att["mime_type"] == "audio/mpeg" and att["size_bytes"] == 2051 and len(att["sha256"]) == 64
    assert sc.result("attachments/get", {"attachment_id": att["attachment_id"]}) == att
    assert sc.result("attachments/list", {})["page"]["total"] == 1
    missing = sc.call("attachments/import", {"path": str(tmp_path / "nope.wav")})
    assert missing["error"]["code"] == 404 and missing["error"]["data"]["code"] == "FILE_NOT_FOUND"

    cite = {"source_audio": att["attachment_id"], "start_time": 12.4, "end_time": 18.9, "speaker": "SPEAKER_00"}
    zh = sc.result(
        "notes/create",
        {
            "title": "操作系统课程录音",
            "folder": "课程/操作系统",
            "blocks": [
                {"text": "这一部分介绍进程调度，包括时间片轮转算法。", "citations": [cite]},
                {"text": "服务器宕机的原因是磁盘被日志占满。"},
            ],
        },
        timeout=SLOW,
    )
    en = sc.result(
        "notes/create",
        {"title": "Migration", "content": "# Database\n\nWe are switching the database from MySQL to PostgreSQL."},
        timeout=SLOW,
    )
    sched, outage = (b["block_id"] for b in zh["blocks"])
    pg = en["blocks"][1]["block_id"]
    for mode in ("fts", "vector", "hybrid"):
        top = _search(sc, "进程调度", mode)[0]
        assert top["block_id"] == sched and top["note_id"] == zh["note_id"], mode
        assert top["citations"][0]["source_audio"] == att["attachment_id"] and top["citations"][0]["start_time"] == 12.4
        assert _search(sc, "PostgreSQL", mode)[0]["block_id"] == pg, mode
    cross = _search(sc, "Why did the server go down?", "vector")
    assert cross[0]["block_id"] == outage, "an English question finds the Chinese block"
    hybrid = _search(sc, "服务器宕机", "hybrid")[0]
    assert hybrid["ranks"]["fts_rank"] == 1 and hybrid["ranks"]["vector_rank"] == 1 and hybrid["ranks"]["rrf_score"]
    in_use = sc.call("attachments/delete", {"attachment_id": att["attachment_id"]})
    assert in_use["error"]["code"] == 409 and in_use["error"]["data"]["code"] == "ATTACHMENT_IN_USE"

    # edit: the unchanged block keeps its id
    edited = sc.result(
        "notes/update",
        {
            "note_id": en["note_id"],
            "content": "# Database\n\nWe are switching the database from MySQL to PostgreSQL.\n\nDone by May.",
        },
        timeout=SLOW,
    )
    assert [b["block_id"] for b in edited["blocks"][:2]] == [b["block_id"] for b in en["blocks"]]

    # switch the embedder: vector and hybrid answer INDEX_MODEL_MISMATCH, fts still works
    status = sc.result("index/status", {})
    assert status["embedding"]["model_id"] == "use-multilingual-v3" and status["vector_index"]["compatible"] is True
    switched = sc.result("index/configure", {"embedder": {"kind": "hash-v1"}})
    assert switched["vector_index"]["compatible"] is False
    assert (switched["embedding"]["model_id"], switched["vector_index"]["model_id"]) == (
        "hash-v1",
        "use-multilingual-v3",
    )
    for mode in ("vector", "hybrid"):
        err = sc.call("search/query", {"query": "进程调度", "mode": mode})["error"]
        assert err["code"] == 409 and err["data"]["code"] == "INDEX_MODEL_MISMATCH", mode
        assert err["data"]["details"]["vector_index"]["dimension"] == 512
    assert _search(sc, "进程调度", "fts")[0]["block_id"] == sched

    job = sc.result("index/rebuild", {"scope": "vectors"})
    assert job["status"] == "queued" and job["kind"] == "index-rebuild"
    sub = sc.result("events/subscribe", {"resource_id": job["job_id"]})
    events = _events_until(sc, sub["subscription_id"], {"Completed", "Failed", "Cancelled"})
    assert events[-1]["event"] == "Completed", events[-1]
    assert any(e["event"] == "Progress" and e["data"]["data"]["phase"] == "embedding" for e in events)
    assert sc.result("index/rebuild/get", {"job_id": job["job_id"]})["status"] == "completed"
    after = sc.result("index/status", {})
    assert after["vector_index"]["compatible"] is True and after["vector_index"]["model_id"] == "hash-v1"
    assert after["status"] == "idle" and after["last_completed_at"]
    assert _search(sc, "进程调度", "hybrid")[0]["block_id"] == sched
    assert _search(sc, "进程调度", "vector")[0]["block_id"] == sched

    # restart: everything is still there (records in SQLite, index in LanceDB, the embedder choice)
    sc.result("shutdown", {})
    sc.notify("exit")
    assert sc.wait() == 0
    again = Sidecar(data_dir)
    try:
        again.initialize()
        assert (
            again.result("notes/get", {"note_id": zh["note_id"]})["blocks"][0]["citations"][0]["speaker"]
            == "SPEAKER_00"
        )
        assert again.result("index/status", {})["embedding"]["model_id"] == "hash-v1"
        for mode in ("fts", "vector", "hybrid"):
            assert _search(again, "进程调度", mode)[0]["block_id"] == sched, mode
        assert again.result("notes/delete", {"note_id": zh["note_id"]}) == {"deleted": True}
        assert all(h["note_id"] != zh["note_id"] for h in _search(again, "进程调度", "hybrid"))
        assert again.result("attachments/delete", {"attachment_id": att["attachment_id"]}) == {"deleted": True}
    finally:
        again.close()


def test_kill_9_during_indexing_leaves_a_usable_index(data_dir: Path) -> None:
    blocks = [{"text": f"块 {i} 的内容 token{i} alpha"} for i in range(5000)]
    sc = Sidecar(data_dir)
    sc.initialize()
    # the first call of a fresh sidecar opens the stores (LanceDB, the embedder registry): 14 s at load 10
    sc.result("index/configure", {"embedder": {"kind": "hash-v1"}}, timeout=SLOW)
    sc.result("notes/create", {"title": "small", "content": "先写入的一段 first"}, timeout=SLOW)
    rids = [sc.request("notes/create", {"title": f"big {n}", "blocks": blocks}) for n in range(2)]
    # observe indexing in progress: some of the big notes' blocks indexed, others not yet
    while True:
        status = sc.result("index/status", {}, timeout=SLOW)
        fts = status["fts_index"]
        if fts["block_count"] > 1 and fts["pending_blocks"] > 0:
            break
        assert fts["block_count"] < 10_001, "indexing finished before it could be interrupted"
    sc.kill_9()
    assert all(r not in [m.get("id") for m in list(sc.lines.queue) if isinstance(m, dict)] for r in rids[1:])
    sc.close()

    again = Sidecar(data_dir)
    try:
        again.initialize()
        notes = again.result("notes/list", {})
        assert notes["page"]["total"] >= 2, "committed notes survived"
        # what the index answers right away is whole rows of committed text, never half-written ones
        valid = {"先写入的一段 first"} | {b["text"] for b in blocks}
        for query in ("alpha", "token7", "first"):
            fts_hits = _search(again, query, "fts", top_k=50)
            assert fts_hits and all(query in h["text"] for h in fts_hits), query
            for hit in fts_hits + _search(again, query, "hybrid", top_k=50):
                assert hit["text"] in valid, hit
        # the catch-up indexes the rest; wait for it by watching the status
        while True:
            status = again.result("index/status", {}, timeout=SLOW)
            if status["fts_index"]["pending_blocks"] == 0 and status["vector_index"]["pending_blocks"] == 0:
                break
        assert status["status"] in ("idle", "indexing") and status["error_message"] is None
        total_blocks = 1 + 5000 * (notes["page"]["total"] - 1)
        assert status["fts_index"]["block_count"] == total_blocks == status["vector_index"]["block_count"]
        big = [n["note_id"] for n in notes["items"] if n["title"].startswith("big")]
        for mode in ("fts", "vector", "hybrid"):
            hits = _search(again, "token4999", mode, filters={"note_ids": big})
            assert hits and hits[0]["text"] == "块 4999 的内容 token4999 alpha", mode
    finally:
        again.close()
