"""Agent runs in-process with the scripted mock provider: the loop, tools, permissions, trace, failures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sidecar.agent.models import AgentRunCreateParams
from sidecar.agent.store import RunRecord, RunStore
from sidecar.core.errors import SidecarError
from tests.support.agent_env import AgentEnv, agent_environment

pytestmark = pytest.mark.anyio

CANARY = "sk-CANARY-agent-3f9b2c7d1e-never-in-a-trace"


Env = AgentEnv


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with agent_environment(tmp_path / "data", tmp_path / "ws") as e:
        (e.workspace / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
        yield e


def ir_request(text: str = "do the task", *, session: str = "s1", **extra: Any) -> dict[str, Any]:
    return {
        "meta": {"sessionId": session, "iteration": 1, "requestId": "host-1", "timestamp": 1, "agentVersion": "t"},
        "systemPrompt": {"roleDefinition": "", "outputConstraints": "", "safetyGuidelines": ""},
        "messages": [{"role": "user", "content": text, "timestamp": 1}],
        "params": {"stream": False},
        **extra,
    }


async def mock(env: Env, *turns: dict[str, Any], summary: dict[str, Any] | None = None, **options: Any) -> None:
    script: dict[str, Any] = {"turns": list(turns)}
    if summary is not None:
        script["summary"] = summary
    await env.providers.create(provider_id="mock", preset="mock", options={"script": script, **options})


def call(name: str, args: dict[str, Any], id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": id}


async def start(env: Env, **params: Any) -> str:
    params.setdefault("provider_id", "mock")
    params.setdefault("request", ir_request())
    run, go = await env.agent.create(AgentRunCreateParams.model_validate(params))
    assert run.status == "running"
    go()
    return run.run_id


async def events_of(env: Env, run_id: str) -> list[Any]:
    page = await env.agent.events(run_id, 0, 1000)
    assert not page.has_more
    return page.items


async def wait_for(env: Env, run_id: str, event: str, limit_s: float = 10) -> Any:
    with anyio.fail_after(limit_s):
        while True:
            for item in await events_of(env, run_id):
                if item.event == event:
                    return item
            await anyio.sleep(0.01)


async def finish(env: Env, run_id: str, limit_s: float = 10) -> list[Any]:
    live = env.agent._live.get(run_id)
    if live is not None:
        with anyio.fail_after(limit_s):
            await live.done.wait()
    return await events_of(env, run_id)


def names(items: list[Any]) -> list[str]:
    return [i.event for i in items]


async def test_read_two_tools_in_one_turn_permission_then_answer(env: Env) -> None:
    await mock(
        env,
        {
            "tool_calls": [
                call("read_file", {"path": "notes.txt"}, "c1"),
                call("calculator", {"expression": "6*7"}, "c2"),
            ]
        },
        {"tool_calls": [call("write_file", {"path": "out/result.txt", "content": "42", "mode": "create"}, "c3")]},
        {"text": "Done: 42."},
    )
    run_id = await start(env)
    required = await wait_for(env, run_id, "PermissionRequired")
    assert required.data["tool_name"] == "write_file" and required.data["permission"] == "filesystem.write"
    assert not (env.workspace / "out" / "result.txt").exists(), "nothing is written before the permission"
    pending = (await env.agent.get(run_id)).pending_permission
    assert pending is not None and pending.request_id == required.data["request_id"]
    env.agent.resolve_permission(run_id, required.data["request_id"], "allow_once")
    items = await finish(env, run_id)

    run = await env.agent.get(run_id)
    assert run.status == "completed" and run.output == "Done: 42." and run.iterations == 3
    assert run.summary.model_calls == 3 and run.summary.tool_calls == 3 and run.summary.errors == 0
    assert (env.workspace / "out" / "result.txt").read_text() == "42"
    seq = [i.sequence for i in items]
    assert seq == list(range(1, len(items) + 1))
    n = names(items)
    assert n[0] == "RunStarted" and n[-1] == "RunCompleted"
    assert n.count("ModelCallStarted") == 3 and n.count("ModelCallCompleted") == 3 and n.count("Usage") == 3
    assert n.index("PermissionRequired") < n.index("PermissionResolved") < len(n) - 1
    calls = [i.data for i in items if i.event == "ToolCall"]
    results = {i.data["tool_call_id"]: i.data for i in items if i.event == "ToolResult"}
    first_call = next(i.data["model_call_id"] for i in items if i.event == "ModelCallStarted")
    assert [c["tool_call_id"] for c in calls] == ["c1", "c2", "c3"]
    assert calls[0]["parent_model_call_id"] == calls[1]["parent_model_call_id"] == first_call
    assert results["c1"]["success"] and "alpha" in results["c1"]["summary"]
    assert results["c2"]["result"]["value"] == 42 and isinstance(results["c2"]["duration_ms"], int)
    resolved = next(i.data for i in items if i.event == "PermissionResolved")
    assert resolved["decision"] == "allow_once" and resolved["source"] == "user"
    completed = next(i.data for i in items if i.event == "ModelCallCompleted")
    assert completed["finish_reason"] == "tool_calls" and completed["input_tokens"] > 0
    snapshot = await env.agent.trace(run_id, 0, 5)
    assert snapshot.status == "completed" and snapshot.has_more and len(snapshot.items) == 5
    assert snapshot.summary.tool_calls == 3 and snapshot.config_snapshot["model"] == "mock-1"
    assert "write_file" in snapshot.config_snapshot["tools"]


async def test_deny_goes_back_as_a_failed_result_and_allow_always_is_remembered(env: Env) -> None:
    write = call("write_file", {"path": "x.txt", "content": "x"}, "w1")
    await mock(env, {"tool_calls": [write]}, {"text": "ok"})
    run_id = await start(env)
    required = await wait_for(env, run_id, "PermissionRequired")
    env.agent.resolve_permission(run_id, required.data["request_id"], "deny")
    items = await finish(env, run_id)
    result = next(i.data for i in items if i.event == "ToolResult")
    assert result["success"] is False and result["error_code"] == "PERMISSION_DENIED"
    assert not (env.workspace / "x.txt").exists()
    assert (await env.agent.get(run_id)).status == "completed"
    with pytest.raises(SidecarError) as gone:
        env.agent.resolve_permission(run_id, required.data["request_id"], "allow_once")
    assert gone.value.code == "AGENT_RUN_NOT_FOUND"

    second = await start(env)
    required = await wait_for(env, second, "PermissionRequired")
    env.agent.resolve_permission(second, required.data["request_id"], "allow_always")
    await finish(env, second)
    assert (env.workspace / "x.txt").read_text() == "x"

    (env.workspace / "x.txt").unlink()
    third = await start(env)  # same session: no question asked
    items = await finish(env, third)
    assert "PermissionRequired" not in names(items)
    resolved = next(i.data for i in items if i.event == "PermissionResolved")
    assert resolved["decision"] == "allow_always" and resolved["source"] == "session_rule"
    other_session = await start(env, request=ir_request(session="s2"))
    await wait_for(env, other_session, "PermissionRequired")  # allow_always is per session
    await env.agent.cancel(other_session)


async def test_permission_wait_is_bounded_and_cancellable(env: Env) -> None:
    await env.config.update({"agent.permissionTimeoutMs": 1000})
    await mock(env, {"tool_calls": [call("write_file", {"path": "y.txt", "content": "y"}, "w")]}, {"text": "fine"})
    run_id = await start(env)
    items = await finish(env, run_id)
    resolved = next(i.data for i in items if i.event == "PermissionResolved")
    assert resolved["decision"] == "deny" and resolved["source"] == "timeout"
    assert not (env.workspace / "y.txt").exists()

    await env.config.update({"agent.permissionTimeoutMs": 60_000})
    run_id = await start(env)
    await wait_for(env, run_id, "PermissionRequired")
    with anyio.fail_after(5):
        result = await env.agent.cancel(run_id)
    assert result.accepted and result.status == "cancelled"
    items = await events_of(env, run_id)
    assert items[-1].event == "RunCancelled" and items[-1].data["code"] == "USER_ABORTED"


async def test_invalid_arguments_and_unknown_tools_go_back_to_the_model(env: Env) -> None:
    await mock(
        env,
        {"tool_calls": [call("calculator", {"expr": "1+1"}, "a"), call("no_such_tool", {}, "b")]},
        {"text": "sorry"},
    )
    run_id = await start(env)
    items = await finish(env, run_id)
    results = {i.data["tool_call_id"]: i.data for i in items if i.event == "ToolResult"}
    assert results["a"]["success"] is False and results["a"]["invalid_arguments"] is True
    assert results["b"]["error_code"] == "TOOL_NOT_ALLOWED" or results["b"]["error_code"] == "UNKNOWN_TOOL"
    run = await env.agent.get(run_id)
    assert run.status == "completed" and run.summary.invalid_tool_calls == 2 and run.summary.errors == 2


async def test_a_futile_loop_is_detected_before_the_hard_limit(env: Env) -> None:
    same = {"tool_calls": [call("read_file", {"path": "missing.txt"}, "r")]}
    await mock(env, same, same, same, {"text": "I could not find it."})
    run_id = await start(env, max_iterations=6)
    items = await finish(env, run_id)
    loops = [i.data for i in items if i.event == "LoopDetected"]
    assert loops and loops[0]["tool_name"] == "read_file" and loops[0]["repeats"] == 2
    assert names(items).index("LoopDetected") < names(items).index("ModelCallStarted", 8)
    assert (await env.agent.get(run_id)).status == "completed"


async def test_max_iterations_token_budget_and_provider_errors(env: Env) -> None:
    await mock(env, {"tool_calls": [call("get_current_time", {}, "t")], "usage": [100, 50]})
    run_id = await start(env, max_iterations=2)
    await finish(env, run_id)
    run = await env.agent.get(run_id)
    assert run.status == "failed" and run.error is not None and run.error.code == "MAX_ITERATIONS"
    assert run.iterations == 2

    run_id = await start(env, token_budget=120)
    await finish(env, run_id)
    run = await env.agent.get(run_id)
    assert run.error is not None and run.error.code == "TOKEN_BUDGET_EXCEEDED" and run.summary.token_usage == 150

    await env.providers.delete("mock")
    await mock(env, {"error": {"code": "auth_invalid", "message": "bad key"}})
    run_id = await start(env)
    items = await finish(env, run_id)
    assert names(items)[-2:] == ["ModelCallFailed", "RunFailed"]
    assert items[-1].data["error"]["code"] == "PROVIDER_AUTH_FAILED"

    await env.providers.delete("mock")
    await mock(env, {"error": {"code": "rate_limited", "times": 1, "retry_after_ms": 1}, "text": "after a retry"})
    run_id = await start(env)
    items = await finish(env, run_id)
    retry = next(i.data for i in items if i.event == "ProviderRetry")
    assert retry["attempt"] == 1 and retry["error"]["code"] == "rate_limited"
    assert (await env.agent.get(run_id)).output == "after a retry"


async def test_context_is_compressed_when_the_window_fills(env: Env) -> None:
    big = "word " * 400  # ~500 tokens of tool output per call
    (env.workspace / "big.txt").write_text(big, encoding="utf-8")
    turns = [{"tool_calls": [call("read_file", {"path": "big.txt"}, f"r{i}")]} for i in range(8)]
    await mock(
        env,
        *turns,
        {"text": "finished"},
        summary={"text": "The user asked to read big.txt repeatedly; it holds the word 'word'."},
        models=[{"id": "mock-1", "context_window": 4000}],
    )
    run_id = await start(env, max_iterations=12)
    items = await finish(env, run_id)
    assert (await env.agent.get(run_id)).status == "completed"
    compressions = [i.data for i in items if i.event == "ContextCompressed"]
    assert compressions, names(items)
    first = compressions[0]
    assert first["usage_ratio_before"] > 0.8 and first["usage_ratio_after"] < 0.5 and first["target_met"]
    assert first["summary_source"] == "model" and "big.txt" in first["summary"]
    assert first["rounds_summarised"] >= 1
    summary_calls = [i.data for i in items if i.event == "ModelCallStarted" and i.data.get("purpose") == "compression"]
    assert len(summary_calls) == len(compressions)


async def test_large_results_become_artifacts_and_secrets_never_enter_the_trace(env: Env) -> None:
    (env.workspace / "large.txt").write_text("line of text\n" * 3000, encoding="utf-8")
    leak = f"Authorization: Bearer {CANARY}"
    await mock(
        env,
        {"tool_calls": [call("read_file", {"path": "large.txt"}, "l"), call("calculator", {"expression": leak}, "k")]},
        {"text": f"the key is {CANARY}"},
    )
    await env.providers.update("mock", api_key=CANARY)
    run_id = await start(env, request=ir_request(f"my api_key is {CANARY}"))
    items = await finish(env, run_id)
    result = next(i.data for i in items if i.event == "ToolResult" and i.data["tool_call_id"] == "l")
    assert "result" not in result and result["artifact"]["size_bytes"] > 16_384
    artifact = await env.agent.artifact(run_id, result["artifact"]["artifact_id"])
    assert artifact.content["total_lines"] == 3000
    dumped = json.dumps([i.model_dump() for i in items])
    assert CANARY not in dumped
    rows = await env.db.read(lambda c: c.execute("SELECT data FROM events").fetchall())
    assert all(CANARY not in r[0] for r in rows)


async def test_cursors_and_unknown_runs(env: Env) -> None:
    await mock(env, {"text": "hi"})
    run_id = await start(env)
    items = await finish(env, run_id)
    page = await env.agent.events(run_id, items[1].sequence, 2)
    assert [i.sequence for i in page.items] == [items[2].sequence, items[3].sequence]
    with pytest.raises(SidecarError) as bad:
        await env.agent.events(run_id, items[-1].sequence + 5, 10)
    assert bad.value.code == "TRACE_CURSOR_INVALID"
    with pytest.raises(SidecarError) as missing:
        await env.agent.trace("run_nope", 0, 10)
    assert missing.value.code == "AGENT_RUN_NOT_FOUND"
    with pytest.raises(SidecarError) as unknown:
        await start(env, allowed_tools=["calculator", "rm_rf"])
    assert unknown.value.code == "TOOL_NOT_FOUND"

    assert await env.agent.store.prune("9999-01-01T00:00:00.000Z") == 1
    with pytest.raises(SidecarError) as pruned:
        await env.agent.events(run_id, 0, 10)
    assert pruned.value.code == "TRACE_NOT_AVAILABLE"
    with pytest.raises(SidecarError) as expired:
        await env.agent.trace(run_id, 3, 10)
    assert expired.value.code == "TRACE_CURSOR_EXPIRED"
    assert (await env.agent.get(run_id)).trace_available is False
    assert await env.events.kind_of(run_id) is None, "events/subscribe answers not found instead of waiting"


async def test_runs_left_running_by_a_crash_are_failed(env: Env) -> None:
    record = RunRecord("run_crashed", "s1", "mock", "mock-1", 5, None, None)
    await env.events.transaction(lambda c, w: RunStore.insert(c, w, record))
    await env.events.append("run_crashed", "RunStarted", {"run_id": "run_crashed"})
    assert await env.agent.store.recover() == ["run_crashed"]
    run = await env.agent.get("run_crashed")
    assert run.status == "failed" and run.error is not None and run.error.code == "AGENT_RUN_INTERRUPTED"
    items = await events_of(env, "run_crashed")
    assert names(items) == ["RunStarted", "RunFailed"]
    listed = await env.agent.list(status="failed", session_id="s1", limit=10, offset=0)
    assert [r.run_id for r in listed.items] == ["run_crashed"]


async def test_odd_inputs_still_end_the_run(env: Env) -> None:
    """A NaN in a tool call's arguments, and a vendor reusing one tool call id for two large results."""
    (env.workspace / "large.txt").write_text("line of text\n" * 3000, encoding="utf-8")
    again = {"tool_calls": [call("read_file", {"path": "large.txt"}, "call_0")]}
    await mock(
        env, {"tool_calls": [call("calculator", {"expression": float("nan")}, "n")]}, again, again, {"text": "ok"}
    )
    run_id = await start(env)
    items = await finish(env, run_id)
    assert (await env.agent.get(run_id)).status == "completed", names(items)
    nan_call = next(i.data for i in items if i.event == "ToolCall" and i.data["tool_call_id"] == "n")
    assert nan_call["args"] == {"expression": None}
    artifacts = [i.data["artifact"]["artifact_id"] for i in items if i.event == "ToolResult" and "artifact" in i.data]
    assert len(artifacts) == 2 and len(set(artifacts)) == 2


async def test_a_run_whose_answer_never_went_out_ends_cancelled(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sidecar.agent.loop.START_GRACE_S", 0.05)
    await mock(env, {"text": "never"})
    run, _start = await env.agent.create(
        AgentRunCreateParams.model_validate({"provider_id": "mock", "request": ir_request()})
    )
    items = await finish(env, run.run_id)
    assert names(items) == ["RunStarted", "RunCancelled"] and items[-1].data["reason"] == "not_started"
    assert (await env.agent.get(run.run_id)).status == "cancelled"


async def test_run_timeout_and_failover_in_the_trace(env: Env) -> None:
    await mock(env, {"text": "slow " * 40, "chunk_chars": 5, "delay_ms": 50})
    constraints = {"timeoutMs": 200}
    request = ir_request(constraints=constraints, params={"stream": True})

    async def sink(_line: bytes) -> None:
        pass

    run, go = await env.agent.create(
        AgentRunCreateParams.model_validate({"provider_id": "mock", "request": request}), stream=sink
    )
    go()
    items = await finish(env, run.run_id)
    failed = (await env.agent.get(run.run_id)).error
    assert failed is not None and failed.code == "TIMEOUT"
    assert names(items)[-2:] == ["ModelCallFailed", "RunFailed"]

    await env.providers.create(
        provider_id="backup", preset="mock", options={"script": {"turns": [{"text": "from the backup"}]}}
    )
    await env.providers.delete("mock")
    await mock(env, {"error": {"code": "model_overloaded", "retryable": False}})
    await env.config.update({"llm.fallbackProvider": "backup"})
    run_id = await start(env)
    items = await finish(env, run_id)
    switched = next(i.data for i in items if i.event == "ProviderSwitched")
    assert switched["from_provider"] == "mock" and switched["to_provider"] == "backup"
    assert (await env.agent.get(run_id)).output == "from the backup"
    completed = next(i.data for i in items if i.event == "ModelCallCompleted")
    assert completed["provider_id"] == "backup"


async def test_a_context_length_error_compresses_and_resubmits_once(env: Env) -> None:
    read = {"tool_calls": [call("read_file", {"path": "notes.txt"}, "r1")]}
    too_long = {"error": {"code": "context_length_exceeded", "times": 1}, "text": "it fits now"}
    await mock(env, read, read, too_long, summary={"text": "The user had notes.txt read twice."})
    run_id = await start(env)
    items = await finish(env, run_id)
    assert (await env.agent.get(run_id)).output == "it fits now"
    compressed = next(i.data for i in items if i.event == "ContextCompressed")
    assert compressed["forced_by"] == "context_length_exceeded" and compressed["rounds_summarised"] >= 1
    failed = [i.data for i in items if i.event == "ModelCallFailed"]
    assert len(failed) == 1 and failed[0]["error"]["code"] == "MODEL_CONTEXT_LENGTH_EXCEEDED"

    await env.providers.delete("mock")
    await mock(env, read, {"error": {"code": "context_length_exceeded"}})  # every time: the error stands
    run_id = await start(env)
    await finish(env, run_id)
    run = await env.agent.get(run_id)
    assert run.status == "failed" and run.error is not None and run.error.code == "MODEL_CONTEXT_LENGTH_EXCEEDED"


async def test_invalid_arguments_are_refused_before_asking_permission(env: Env) -> None:
    await mock(env, {"tool_calls": [call("write_file", {"path": "x.txt"}, "w")]}, {"text": "oops"})
    run_id = await start(env)
    items = await finish(env, run_id)
    assert "PermissionRequired" not in names(items)
    result = next(i.data for i in items if i.event == "ToolResult")
    assert result["error_code"] == "INVALID_ARGUMENTS" and result["invalid_arguments"] is True
