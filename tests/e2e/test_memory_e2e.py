"""memory/* over real stdio with the real default embedder: Chinese and English memories, a correction that
supersedes, search, errors, then a kill -9 and a restart that finds everything again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e

FIRST_CALL_S = 60  # the first memory call imports lancedb and loads the USE model


def _add(sc: Sidecar, params: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
    return sc.result("memory/add", params, timeout=timeout)


def test_memory_over_stdio_survives_kill_and_restart(ready: Sidecar, data_dir: Path) -> None:
    beijing = _add(ready, {"content": "我住在北京", "type": "semantic", "importance": 0.9}, FIRST_CALL_S)
    assert beijing["superseded"] == []
    item = beijing["memory"]["item"]
    assert item["id"].startswith("mem_") and item["type"] == "semantic" and isinstance(item["createdAt"], int)
    assert "relevanceScore" not in item and "sessionId" not in item  # IR: absent optionals are omitted
    assert beijing["memory"]["status"] == "active" and beijing["memory"]["superseded_by"] is None
    vim = _add(ready, {"content": "My favourite editor is Vim", "type": "semantic"})
    episode = _add(
        ready,
        {"content": "今天讨论了数据库迁移方案", "type": "episodic", "session_id": "s1", "source": "agent_thought"},
    )
    assert episode["memory"]["item"]["sessionId"] == "s1"

    # corrections, in Chinese and in English
    shanghai = _add(ready, {"content": "更正：我现在住在上海", "type": "semantic"})
    assert [s["memory_id"] for s in shanghai["superseded"]] == [beijing["memory"]["item"]["id"]]
    assert shanghai["superseded"][0]["reason"] in {"correction", "changed_value"}
    assert shanghai["memory"]["supersedes"] == [beijing["memory"]["item"]["id"]]
    emacs = _add(ready, {"content": "Actually, my favourite editor is now Emacs", "type": "semantic"})
    assert [s["memory_id"] for s in emacs["superseded"]] == [vim["memory"]["item"]["id"]]
    old = ready.result("memory/get", {"memory_id": beijing["memory"]["item"]["id"]})
    assert old["status"] == "superseded" and old["superseded_by"] == shanghai["memory"]["item"]["id"]

    def search(query: str, **kw: Any) -> list[dict[str, Any]]:
        return ready.result("memory/search", {"query": query, **kw})["items"]

    hits = search("用户住在哪个城市？", top_k=2)
    assert hits[0]["item"]["id"] == shanghai["memory"]["item"]["id"]
    assert hits[0]["item"]["relevanceScore"] == hits[0]["score_details"]["score"] > 0
    assert beijing["memory"]["item"]["id"] not in [h["item"]["id"] for h in search("我住在北京")]
    assert search("Which text editor does the user like?", top_k=1)[0]["item"]["id"] == emacs["memory"]["item"]["id"]
    assert [h["item"]["id"] for h in search("数据库迁移", types=["episodic"], session_id="s1")] == [
        episode["memory"]["item"]["id"]
    ]

    listed = ready.result("memory/list", {"limit": 2})
    assert listed["page"] == {"total": 3, "limit": 2, "offset": 0}
    assert listed["items"][0]["item"]["id"] == emacs["memory"]["item"]["id"]  # newest first

    # errors: unknown id, bad params
    missing = ready.call("memory/get", {"memory_id": "mem_nope"})
    assert missing["error"]["code"] == 404 and missing["error"]["data"]["code"] == "MEMORY_NOT_FOUND"
    bad_type = ready.call("memory/add", {"content": "x", "type": "procedural"})
    assert bad_type["error"]["code"] == -32602 and bad_type["error"]["data"]["code"] == "VALIDATION_ERROR"
    typo = ready.call("memory/search", {"query": "x", "topk": 3})
    assert typo["error"]["code"] == -32602
    unknown_link = ready.call("memory/add", {"content": "x", "type": "semantic", "supersedes": ["mem_nope"]})
    assert unknown_link["error"]["code"] == 404

    # a crash: every answered write is durable, nothing half written
    ready.kill_9()
    again = Sidecar(data_dir)
    try:
        again.initialize()
        after = again.result("memory/list", {"include_superseded": True}, timeout=FIRST_CALL_S)
        assert after["page"]["total"] == 5
        statuses = {r["item"]["content"]: r["status"] for r in after["items"]}
        assert statuses == {
            "我住在北京": "superseded",
            "My favourite editor is Vim": "superseded",
            "今天讨论了数据库迁移方案": "active",
            "更正：我现在住在上海": "active",
            "Actually, my favourite editor is now Emacs": "active",
        }
        hits = again.result("memory/search", {"query": "用户住在哪个城市？", "top_k": 1}, timeout=FIRST_CALL_S)["items"]
        assert hits[0]["item"]["id"] == shanghai["memory"]["item"]["id"]
        deleted = again.result("memory/delete", {"memory_id": episode["memory"]["item"]["id"]})
        assert deleted == {"memory_id": episode["memory"]["item"]["id"], "deleted": True, "restored": []}
        compacted = again.result("memory/compact", {})
        assert compacted["expired_removed"] == [] and compacted["merged"] == [] and compacted["remaining"] == 4
        assert again.result("shutdown") is None
    finally:
        again.close()
