"""Jobs and resource events over real stdio: subscribe (replay then live), pull pages, cancel, restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.sidecar_proc import Sidecar

pytestmark = pytest.mark.e2e


def _collect_events(sc: Sidecar, subscription_id: str, until: str, timeout: float = 20) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while True:
        msg = sc.next(timeout)
        if (
            isinstance(msg, dict)
            and msg.get("method") == "event"
            and msg["params"]["subscription_id"] == subscription_id
        ):
            events.append(msg["params"])
            if msg["params"]["event"] == until:
                return events


def test_job_events_replay_then_live_and_end(ready: Sidecar) -> None:
    job = ready.result("dev/jobs/create", {"steps": 5, "step_ms": 20})
    assert job["status"] == "queued" and job["completed_at"] is None
    sub = ready.result("events/subscribe", {"resource_id": job["job_id"], "after_sequence": 0})
    events = _collect_events(ready, sub["subscription_id"], "Completed")
    names = [e["event"] for e in events]
    assert names[0] == "Queued" and names[-1] == "Completed"
    assert names.count("Progress") >= 5
    seqs = [e["id"] for e in events]
    assert seqs == sorted(set(seqs)), "no duplicates, increasing"
    for e in events:
        assert e["id"] == e["data"]["sequence"]
        assert e["data"]["resource_id"] == job["job_id"]
        assert e["data"]["timestamp"].endswith("Z")
    progress = [e["data"]["data"] for e in events if e["event"] == "Progress"][-1]
    assert {"phase", "current", "total", "percent", "message"} <= set(progress)
    final = ready.result("dev/jobs/get", {"job_id": job["job_id"]})
    assert final["status"] == "completed" and final["completed_at"] and final["result"] == {"steps": 5}
    # the subscription ended with the terminal event: unsubscribing now finds nothing
    gone = ready.call("events/unsubscribe", {"subscription_id": sub["subscription_id"]})
    assert gone["error"]["code"] == 404 and gone["error"]["data"]["code"] == "SUBSCRIPTION_NOT_FOUND"
    # pull: cursor pages over the same log
    page = ready.result("dev/jobs/events", {"job_id": job["job_id"], "after_sequence": 0, "limit": 2})
    assert [i["sequence"] for i in page["items"]] == seqs[:2]
    assert page["has_more"] is True and page["next_sequence"] == seqs[1]
    rest = ready.result(
        "dev/jobs/events", {"job_id": job["job_id"], "after_sequence": page["next_sequence"], "limit": 1000}
    )
    assert [i["sequence"] for i in rest["items"]] == seqs[2:] and rest["has_more"] is False


def test_subscribe_after_a_sequence_replays_only_the_rest(ready: Sidecar) -> None:
    job = ready.result("dev/jobs/create", {"steps": 2, "step_ms": 1})
    first = ready.result("events/subscribe", {"resource_id": job["job_id"]})
    all_events = _collect_events(ready, first["subscription_id"], "Completed")
    cut = all_events[1]["id"]
    again = ready.result("events/subscribe", {"resource_id": job["job_id"], "after_sequence": cut})
    replay = _collect_events(ready, again["subscription_id"], "Completed")
    assert [e["id"] for e in replay] == [e["id"] for e in all_events if e["id"] > cut]


def test_subscribe_to_unknown_resource(ready: Sidecar) -> None:
    reply = ready.call("events/subscribe", {"resource_id": "nope"})
    assert reply["error"]["code"] == 404 and reply["error"]["data"]["code"] == "RESOURCE_NOT_FOUND"


def test_cancel_a_running_job_in_a_thread(ready: Sidecar) -> None:
    job = ready.result("dev/jobs/create", {"steps": 1000, "step_ms": 50, "in_thread": True})
    sub = ready.result("events/subscribe", {"resource_id": job["job_id"]})
    # wait until it runs
    while True:
        msg = ready.next()
        if isinstance(msg, dict) and msg.get("method") == "event" and msg["params"]["event"] == "Progress":
            break
    assert ready.result("dev/jobs/cancel", {"job_id": job["job_id"]})["accepted"] is True
    events = _collect_events(ready, sub["subscription_id"], "Cancelled")
    assert events[-1]["event"] == "Cancelled"
    final = ready.result("dev/jobs/get", {"job_id": job["job_id"]})
    assert final["status"] == "cancelled" and final["completed_at"]


def test_failed_job_carries_the_project_code(ready: Sidecar) -> None:
    job = ready.result("dev/jobs/create", {"steps": 1, "step_ms": 1, "fail_code": "PROVIDER_UNAVAILABLE"})
    sub = ready.result("events/subscribe", {"resource_id": job["job_id"]})
    events = _collect_events(ready, sub["subscription_id"], "Failed")
    assert events[-1]["data"]["data"]["error"]["code"] == "PROVIDER_UNAVAILABLE"
    final = ready.result("dev/jobs/get", {"job_id": job["job_id"]})
    assert final["status"] == "failed" and final["error"]["code"] == "PROVIDER_UNAVAILABLE" and final["completed_at"]


def test_unknown_job(ready: Sidecar) -> None:
    reply = ready.call("dev/jobs/get", {"job_id": "missing"})
    assert reply["error"]["code"] == 404 and reply["error"]["data"]["code"] == "JOB_NOT_FOUND"


def test_kill_9_then_restart_keeps_events_and_fails_the_interrupted_job(data_dir: Path) -> None:
    sc = Sidecar(data_dir)
    sc.initialize()
    done = sc.result("dev/jobs/create", {"steps": 2, "step_ms": 1})
    sub = sc.result("events/subscribe", {"resource_id": done["job_id"]})
    before = _collect_events(sc, sub["subscription_id"], "Completed")
    running = sc.result("dev/jobs/create", {"steps": 100_000, "step_ms": 10})
    sub2 = sc.result("events/subscribe", {"resource_id": running["job_id"]})
    seen = 0
    while seen < 3:
        msg = sc.next()
        if (
            isinstance(msg, dict)
            and msg.get("method") == "event"
            and msg["params"]["subscription_id"] == sub2["subscription_id"]
        ):
            seen += 1
    sc.kill_9()
    sc.close()

    again = Sidecar(data_dir)
    try:
        again.initialize()
        page = again.result("dev/jobs/events", {"job_id": done["job_id"], "after_sequence": 0, "limit": 1000})
        assert [(i["sequence"], i["event"]) for i in page["items"]] == [(e["id"], e["event"]) for e in before]
        job = again.result("dev/jobs/get", {"job_id": running["job_id"]})
        assert job["status"] == "failed" and job["error"]["code"] == "JOB_INTERRUPTED" and job["completed_at"]
        sub3 = again.result("events/subscribe", {"resource_id": running["job_id"]})
        events = _collect_events(again, sub3["subscription_id"], "Failed")
        assert events[-1]["data"]["data"]["error"]["code"] == "JOB_INTERRUPTED"
    finally:
        again.close()


def test_job_list_pages(ready: Sidecar) -> None:
    ids = [ready.result("dev/jobs/create", {"steps": 0})["job_id"] for _ in range(3)]
    first = ready.result("dev/jobs/list", {"limit": 2, "offset": 0})
    assert first["page"] == {"total": 3, "limit": 2, "offset": 0}
    second = ready.result("dev/jobs/list", {"limit": 2, "offset": 2})
    assert second["page"] == {"total": 3, "limit": 2, "offset": 2}
    assert sorted(j["job_id"] for j in first["items"] + second["items"]) == sorted(ids)
    bad = ready.call("dev/jobs/list", {"status": "exploded"})
    assert bad["error"]["code"] in (400, -32602)
