"""ContextBuilder: system prompt sections, build estimates, rounds, and compression per the IR standard."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import anyio
import pytest

from sidecar.agent.context import (
    DEFAULT_SYSTEM_PROMPT,
    SUMMARY_HEADER,
    Compression,
    ContextBuilder,
    render_transcript,
    split_rounds,
)
from sidecar.agent.tokens import TokenCalibrator, estimate_tokens
from sidecar.ir import (
    MetonaContext,
    MetonaMemoryItem,
    MetonaMessage,
    MetonaSystemPrompt,
    MetonaToolCall,
    MetonaToolDef,
    MetonaToolParams,
    MetonaToolResult,
)
from sidecar.ir.tools import MetonaParamField

SECRET_OUTPUT = "FULL-TOOL-OUTPUT-MARKER"

# ---------------------------------------------------------------- builders

_ts = iter(range(1_700_000_000_000, 1_800_000_000_000, 1000))


def user(text: str) -> MetonaMessage:
    return MetonaMessage(role="user", content=text, timestamp=next(_ts))


def assistant(
    text: str = "", *calls: tuple[str, str, dict[str, object]], reasoning: str | None = None
) -> MetonaMessage:
    tool_calls = [MetonaToolCall(id=i, name=n, args=a, iteration=1, timestamp=next(_ts)) for i, n, a in calls] or None
    return MetonaMessage(
        role="assistant", content=text, tool_calls=tool_calls, reasoning_content=reasoning, timestamp=next(_ts)
    )


def tool(call_id: str, name: str, result: object, *, success: bool = True, summary: str | None = None) -> MetonaMessage:
    r = MetonaToolResult(
        tool_call_id=call_id,
        tool_name=name,
        result=result,
        summary=summary,
        success=success,
        error=None if success else "boom",
        duration_ms=5,
        timestamp=next(_ts),
    )
    return MetonaMessage(role="tool", content="", tool_result=r, timestamp=next(_ts))


def system(text: str) -> MetonaMessage:
    return MetonaMessage(role="system", content=text, timestamp=next(_ts))


def long_history(turns: int = 30, *, zh: bool = False) -> list[MetonaMessage]:
    """``turns`` user turns, each: user → assistant(tool call) → tool (long output) → assistant answer."""
    out: list[MetonaMessage] = []
    for i in range(turns):
        q = (
            f"第{i}个问题：帮我找一下关于项目计划的笔记。"
            if zh
            else f"Question {i}: find my notes about the project plan."
        )
        out.append(user(q))
        name = "knowledge_search" if i % 3 else "read_note"
        out.append(assistant("", (f"call_{i}", name, {"query": f"project plan {i}"})))
        rows = [
            {"title": f"note {i}.{j}", "text": (SECRET_OUTPUT + " lorem ipsum dolor sit amet ") * 20} for j in range(8)
        ]
        out.append(tool(f"call_{i}", name, rows, success=i % 7 != 3))
        answer = f"答案{i}：项目计划在笔记 {i}.1 中。" if zh else f"Answer {i}: the plan is in note {i}.1."
        out.append(assistant(answer))
    return out


def make_tool_def() -> MetonaToolDef:
    return MetonaToolDef(
        name="knowledge_search",
        description="Search the user's knowledge base",
        parameters=MetonaToolParams(properties={"query": MetonaParamField(type="string", description="query")}),
        category="search",
        risk_level="safe",
        requires_permission=False,
        timeout_ms=10_000,
    )


def memory(mid: str, text: str, *, created: int, score: float | None = None, summary: str | None = None):
    return MetonaMemoryItem(
        id=mid,
        type="semantic",
        content=text,
        summary=summary,
        source="user_input",
        importance=0.5,
        relevance_score=score,
        created_at=created,
    )


def build(cb: ContextBuilder, history: list[MetonaMessage], window: int, **kw: object) -> MetonaContext:
    args: dict[str, object] = {
        "context_id": "ctx_1",
        "session_id": "s_1",
        "base_prompt": None,
        "history": history,
        "memories": (),
        "tools": [make_tool_def()],
        "user_input": "hello",
        "iteration": 1,
        "context_window": window,
    }
    args.update(kw)
    return cb.build(**args)  # type: ignore[arg-type]


def window_for(cb: ContextBuilder, history: list[MetonaMessage], ratio: float, **kw: object) -> int:
    """A context window that puts ``history`` at ``ratio`` usage."""
    tokens = build(cb, history, 1_000_000, **kw).estimated_tokens
    return int(tokens / ratio)


def summariser(
    text: str | None = "The user asked about the project plan; it is in the notes.",
) -> tuple[Callable[[str], Awaitable[str | None]], list[str]]:
    seen: list[str] = []

    async def summarise(transcript: str) -> str | None:
        seen.append(transcript)
        return text

    return summarise, seen


def assert_well_formed(history: list[MetonaMessage]) -> None:
    """Never starts with a tool message; every tool message answers a call of an earlier assistant message."""
    assert history and history[0].role != "tool"
    called: set[str] = set()
    for m in history:
        if m.role == "assistant":
            called.update(c.id for c in m.tool_calls or ())
        if m.role == "tool":
            assert m.tool_result is not None and m.tool_result.tool_call_id in called


# ---------------------------------------------------------------- split_rounds


def test_split_rounds_groups_tool_results_with_their_assistant() -> None:
    h = [
        user("q"),
        assistant("", ("a", "t1", {}), ("b", "t2", {})),
        tool("a", "t1", 1),
        tool("b", "t2", 2),
        assistant("done"),
        user("q2"),
    ]
    rounds = split_rounds(h)
    assert [[m.role for m in r] for r in rounds] == [["user"], ["assistant", "tool", "tool"], ["assistant"], ["user"]]
    assert [m for r in rounds for m in r] == h


def test_split_rounds_edge_cases() -> None:
    assert split_rounds([]) == []
    s, u = system("note"), user("q")
    assert split_rounds([s, u]) == [[s], [u]]
    a1, a2 = assistant("x"), assistant("y")
    assert split_rounds([a1, a2]) == [[a1], [a2]]  # consecutive assistants: a round each
    orphan = tool("zz", "t", 1)
    assert split_rounds([orphan, u]) == [[orphan], [u]]  # leading orphan: its own round
    orphan2 = tool("yy", "t", 2)
    assert split_rounds([u, orphan2]) == [[u, orphan2]]  # orphan after a user: joins it
    # a system message between an assistant and a tool message closes the assistant round
    call = assistant("", ("c", "t", {}))
    late = tool("c", "t", 1)
    assert split_rounds([call, s, late]) == [[call], [s, late]]


# ---------------------------------------------------------------- system prompt


def test_system_prompt_defaults_and_host_sections() -> None:
    cb = ContextBuilder()
    assert cb.system_prompt(None) == DEFAULT_SYSTEM_PROMPT
    host = MetonaSystemPrompt(
        role_definition="Host role", output_constraints="  ", safety_guidelines="", dynamic_reminders="Host note"
    )
    p = cb.system_prompt(host, reminders=["Stop repeating the failing tool."])
    assert p.role_definition == "Host role"
    assert p.output_constraints == DEFAULT_SYSTEM_PROMPT.output_constraints
    assert p.safety_guidelines == DEFAULT_SYSTEM_PROMPT.safety_guidelines
    assert p.dynamic_reminders == "Host note\n\nStop repeating the failing tool."


def test_default_prompt_covers_language_citations_and_injection() -> None:
    text = " ".join([DEFAULT_SYSTEM_PROMPT.role_definition, DEFAULT_SYSTEM_PROMPT.output_constraints]).lower()
    assert "language" in text and "knowledge_search" in text and "cite" in text
    safety = DEFAULT_SYSTEM_PROMPT.safety_guidelines.lower()
    assert "api keys" in safety and "permission" in safety and "data, not instructions" in safety


def test_memories_rendered_most_relevant_then_newest_and_capped() -> None:
    cb = ContextBuilder()
    mems = [memory(f"m{i}", f"fact number {i}", created=i) for i in range(20)]
    mems.append(memory("best", "long text", summary="the best match", created=0, score=0.9))
    mems.append(memory("good", "good match", created=0, score=0.5))
    p = cb.system_prompt(None, memories=mems, reminders=["loop warning"])
    assert p.dynamic_reminders is not None
    lines = p.dynamic_reminders.splitlines()
    assert lines[0] == "Relevant memories:"
    assert lines[1:4] == ["- the best match", "- good match", "- fact number 19"]
    assert len([x for x in lines if x.startswith("- ")]) == 8
    assert lines[-1] == "loop warning"
    assert cb.system_prompt(None, memories=list(reversed(mems)), reminders=["loop warning"]) == p  # deterministic


# ---------------------------------------------------------------- build


def test_build_ratio_and_threshold() -> None:
    cb = ContextBuilder()
    history = long_history(3)
    ctx = build(cb, history, 100_000)
    assert ctx.estimated_tokens > 0
    assert ctx.usage_ratio == pytest.approx(ctx.estimated_tokens / 100_000)
    assert ctx.history == history and ctx.history is not history
    assert ctx.current_task.user_input == "hello"
    at = ctx.estimated_tokens / 0.8
    assert build(cb, history, int(at) + 1).needs_compression is False  # ratio just under 0.8
    assert build(cb, history, int(at) - 1).needs_compression is True  # just over


def test_build_counts_history_and_tools() -> None:
    cb = ContextBuilder()
    small = build(cb, [user("q")], 100_000, tools=[]).estimated_tokens
    with_tools = build(cb, [user("q")], 100_000).estimated_tokens
    bigger = build(cb, long_history(3), 100_000, tools=[]).estimated_tokens
    assert small < with_tools and small < bigger


def test_build_applies_calibration() -> None:
    cal = TokenCalibrator()
    cb = ContextBuilder(calibrator=cal)
    raw = build(cb, long_history(2), 100_000).estimated_tokens
    cal.observe(1000, 2000)
    assert build(cb, long_history(2), 100_000).estimated_tokens == pytest.approx(raw * 2, abs=2)


def test_builder_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        ContextBuilder(keep_rounds=0)
    with pytest.raises(ValueError):
        ContextBuilder(threshold=0.5, target=0.8)


# ---------------------------------------------------------------- compress


@pytest.mark.anyio
async def test_compress_long_history_meets_target_and_keeps_last_rounds() -> None:
    cb = ContextBuilder()
    history = long_history(30)
    window = window_for(cb, history, 0.9)
    ctx = build(cb, history, window)
    assert ctx.needs_compression and ctx.usage_ratio > 0.8
    summarise, seen = summariser()

    new, comp = await cb.compress(ctx, summarise, context_window=window)

    assert comp.target_met and new.usage_ratio < 0.5 and comp.usage_ratio_after < 0.5
    assert comp.usage_ratio_before > 0.8 and comp.tokens_after < comp.tokens_before
    assert new.needs_compression is False
    assert comp.summary_source == "model" and comp.rounds_kept == 5
    assert comp.rounds_total == 90 and comp.rounds_summarised == 85  # 3 rounds per turn
    # the last 5 rounds (= the last 5 messages here, one message per round except tool rounds) verbatim
    rounds = split_rounds(history)
    kept = [m for r in rounds[-5:] for m in r]
    assert new.history[1:] == kept
    assert comp.first_kept_index == len(history) - len(kept) == comp.messages_summarised
    assert history[comp.first_kept_index] == kept[0]
    # one summary message first, a valid user message
    head = new.history[0]
    assert head.role == "user" and head.content.startswith(SUMMARY_HEADER)
    assert isinstance(head.timestamp, int) and head.timestamp > 0
    assert "The user asked about the project plan" in head.content
    assert_well_formed(new.history)
    # the summariser got a bounded plain-text transcript
    assert len(seen) == 1 and len(seen[0]) <= 26_000 and "User: Question 0" in seen[0]
    assert new.estimated_tokens == comp.tokens_after


@pytest.mark.anyio
async def test_tool_facts_are_names_and_status_only() -> None:
    cb = ContextBuilder()
    history = long_history(12)
    window = window_for(cb, history, 0.9)
    new, comp = await cb.compress(build(cb, history, window), summariser()[0], context_window=window)
    head = new.history[0].content
    assert "Tool calls (name: status; outputs omitted):" in head
    assert "- read_note: success" in head and "- knowledge_search: success" in head
    assert "- read_note: failed" in head and "- knowledge_search: failed" in head  # calls 3 and 10 failed
    assert SECRET_OUTPUT not in head and "lorem ipsum" not in head
    summarised_calls = {m.tool_result.tool_call_id for m in history[: comp.first_kept_index] if m.tool_result}
    assert {f["tool_call_id"] for f in comp.tool_facts} == summarised_calls
    assert all(set(f) == {"tool_name", "tool_call_id", "success"} for f in comp.tool_facts)
    assert {"tool_name": "read_note", "tool_call_id": "call_3", "success": False} in comp.tool_facts
    event = comp.to_event()
    assert json.loads(json.dumps(event)) == event
    assert event["summary_source"] == "model" and event["first_kept_index"] == comp.first_kept_index


@pytest.mark.anyio
async def test_calls_without_results_count_as_failed() -> None:
    cb = ContextBuilder(keep_rounds=1)
    history = [user("q"), assistant("", ("lost", "write_note", {})), user("again"), assistant("ok")]
    new, comp = await cb.compress(build(cb, history, 100), summariser()[0], context_window=100)
    assert {"tool_name": "write_note", "tool_call_id": "lost", "success": False} in comp.tool_facts
    assert "- write_note: failed" in new.history[0].content


@pytest.mark.anyio
async def test_older_kept_tool_results_are_reduced_when_needed() -> None:
    cb = ContextBuilder(keep_rounds=8)
    history = long_history(6)
    window = window_for(cb, history, 0.95)
    new, comp = await cb.compress(build(cb, history, window), summariser()[0], context_window=window)
    assert comp.target_met
    kept_tools = [m for m in new.history if m.role == "tool"]
    assert kept_tools
    last_round = split_rounds(history)[-1]
    for m in kept_tools:
        if m not in last_round:
            assert m.tool_result is not None and m.tool_result.result is None
            assert m.tool_result.summary is not None and len(m.tool_result.summary) <= 540
            assert m.tool_result.summary.startswith(f"[{m.tool_result.tool_name}: ")
    assert comp.tool_results_reduced >= 1
    assert_well_formed(new.history)


@pytest.mark.anyio
async def test_fewer_rounds_when_kept_rounds_are_too_big() -> None:
    cb = ContextBuilder(keep_rounds=5)
    history = long_history(3)
    # the last five rounds carry huge user/assistant texts that cannot be reduced
    for i in range(5):
        history.append(user(f"essay {i}: " + "word " * 3000))
    history.append(assistant("final answer"))
    window = window_for(cb, history, 0.9)
    new, comp = await cb.compress(build(cb, history, window), summariser()[0], context_window=window)
    assert comp.rounds_kept < 5
    assert new.history[-1] == history[-1]  # the newest round is always kept
    assert comp.target_met and new.usage_ratio < 0.5
    assert_well_formed(new.history)


@pytest.mark.anyio
async def test_target_not_met_is_reported_not_raised() -> None:
    cb = ContextBuilder()
    history = [*long_history(4), user("enormous " * 20_000)]
    window = window_for(cb, history, 0.9)
    new, comp = await cb.compress(build(cb, history, window), summariser()[0], context_window=window)
    assert comp.rounds_kept == 1 and new.history[-1] == history[-1]
    assert comp.target_met is False and comp.usage_ratio_after >= 0.5
    assert comp.tokens_after < comp.tokens_before


@pytest.mark.anyio
async def test_newest_round_tool_result_is_cut_as_a_last_resort() -> None:
    cb = ContextBuilder()
    history = [*long_history(4), assistant("", ("big", "read_note", {})), tool("big", "read_note", "x y " * 40_000)]
    window = window_for(cb, history, 0.9)
    new, comp = await cb.compress(build(cb, history, window), summariser()[0], context_window=window)
    assert comp.target_met
    last = new.history[-1]
    assert last.tool_result is not None and last.tool_result.tool_call_id == "big"
    assert last.tool_result.summary is not None and len(last.tool_result.summary) < 160_000 * 0.9
    assert last.tool_result.summary.startswith("[read_note: success] x y")
    assert comp.usage_ratio_after > 0.3  # cut to what the budget leaves, not to nothing
    assert_well_formed(new.history)


@pytest.mark.anyio
@pytest.mark.parametrize("outcome", ["none", "empty", "error"])
async def test_summariser_failure_falls_back_to_extract(outcome: str) -> None:
    async def summarise(transcript: str) -> str | None:
        if outcome == "error":
            raise RuntimeError("provider down")
        return None if outcome == "none" else "   "

    cb = ContextBuilder()
    history = long_history(10)
    window = window_for(cb, history, 0.9)
    new, comp = await cb.compress(build(cb, history, window), summarise, context_window=window)
    assert comp.summary_source == "extract"
    assert "User asked: Question 0" in comp.summary and "Assistant answered: Answer 0" in comp.summary
    assert comp.summary in new.history[0].content
    assert comp.target_met
    assert SECRET_OUTPUT not in new.history[0].content


@pytest.mark.anyio
async def test_cancellation_propagates() -> None:
    cb = ContextBuilder()
    history = long_history(10)
    window = window_for(cb, history, 0.9)
    ctx = build(cb, history, window)
    started = anyio.Event()
    finished = False

    async def hanging(transcript: str) -> str | None:
        started.set()
        await anyio.sleep_forever()
        return None

    async def run() -> None:
        nonlocal finished
        await cb.compress(ctx, hanging, context_window=window)
        finished = True

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            tg.cancel_scope.cancel()
    assert finished is False

    async def cancelled(transcript: str) -> str | None:
        raise anyio.get_cancelled_exc_class()()

    with pytest.raises(anyio.get_cancelled_exc_class()):
        await cb.compress(ctx, cancelled, context_window=window)


@pytest.mark.anyio
async def test_input_is_not_mutated_and_system_prompt_is_kept() -> None:
    cb = ContextBuilder()
    history = long_history(20)
    snapshot = [m.model_dump() for m in history]
    base = MetonaSystemPrompt(role_definition="Host role", output_constraints="", safety_guidelines="Be safe")
    mems = [memory("m1", "the user prefers Markdown tables", created=5)]
    window = window_for(cb, history, 0.9, base_prompt=base, memories=mems, reminders=["r1"])
    ctx = build(cb, history, window, base_prompt=base, memories=mems, reminders=["r1"])
    ctx_dump = ctx.model_dump()

    new, comp = await cb.compress(
        ctx, summariser()[0], context_window=window, base_prompt=base, memories=mems, reminders=["r1"]
    )
    assert new is not ctx
    assert [m.model_dump() for m in history] == snapshot
    assert ctx.model_dump() == ctx_dump and ctx.history == history
    assert new.system_prompt == ctx.system_prompt
    assert new.relevant_memories == ctx.relevant_memories
    assert new.current_task == ctx.current_task and new.id == ctx.id
    # without the prompt inputs the context's own prompt is kept
    new2, _ = await cb.compress(ctx, summariser()[0], context_window=window)
    assert new2.system_prompt == ctx.system_prompt
    assert comp.rounds_summarised > 0


@pytest.mark.anyio
async def test_chinese_history() -> None:
    cb = ContextBuilder()
    history = long_history(30, zh=True)
    window = window_for(cb, history, 0.85)
    summarise, seen = summariser("用户多次询问项目计划，答案在笔记中。")
    new, comp = await cb.compress(build(cb, history, window), summarise, context_window=window)
    assert comp.target_met and new.usage_ratio < 0.5
    assert "用户多次询问项目计划" in new.history[0].content
    assert "第0个问题" in seen[0]
    assert new.history[-1].content == "答案29：项目计划在笔记 29.1 中。"
    # the extractive fallback keeps Chinese too
    _, comp2 = await cb.compress(build(cb, history, window), summariser(None)[0], context_window=window)
    assert comp2.summary_source == "extract" and "第0个问题" in comp2.summary


@pytest.mark.anyio
async def test_nothing_to_compress_returns_the_same_context() -> None:
    cb = ContextBuilder()
    ctx = build(cb, [user("hi " * 500)], 100)
    summarise, seen = summariser()
    new, comp = await cb.compress(ctx, summarise, context_window=100)
    assert new is ctx
    assert comp.rounds_summarised == 0 and comp.summary_source == "none" and comp.target_met is False
    assert seen == []


@pytest.mark.anyio
async def test_repeated_compression_carries_tool_facts_forward() -> None:
    cb = ContextBuilder()
    history = long_history(10)
    window = window_for(cb, history, 0.9)
    first, _ = await cb.compress(build(cb, history, window), summariser("first summary")[0], context_window=window)
    grown = [*first.history, *long_history(10)[4:]]  # the conversation goes on after the summary
    ctx2 = build(cb, grown, window)
    second, comp2 = await cb.compress(ctx2, summariser("second summary")[0], context_window=window)
    assert comp2.summary_source == "model" and comp2.rounds_summarised > 0 and comp2.target_met
    head = second.history[0].content
    assert head.startswith(SUMMARY_HEADER) and "second summary" in head
    assert sum(1 for m in second.history if m.content.startswith(SUMMARY_HEADER)) == 1
    # the first summary's facts (read_note ran in turns 0, 3, 6, 9) survive in the second
    facts = [line for line in head.splitlines() if line.startswith("- ")]
    count = sum(int(line.split("×")[1]) if "×" in line else 1 for line in facts if line.startswith("- read_note"))
    assert count >= 4
    assert_well_formed(second.history)


@pytest.mark.anyio
async def test_leading_orphan_tool_is_never_kept_first() -> None:
    cb = ContextBuilder(keep_rounds=5)
    history = [tool("ghost", "t", "x " * 4000), user("q"), assistant("a")]
    window = window_for(cb, history, 0.9)
    new, comp = await cb.compress(build(cb, history, window), summariser()[0], context_window=window)
    assert new.history[0].role == "user" and new.history[0].content.startswith(SUMMARY_HEADER)
    assert comp.rounds_summarised >= 1 and new.history[-2:] == history[-2:]
    assert_well_formed(new.history)


def test_render_transcript_is_bounded_and_plain() -> None:
    history = long_history(200)
    text = render_transcript(history, max_chars=5_000)
    assert len(text) <= 5_100
    assert text.startswith("User: Question 0") and text.rstrip().endswith("Answer 199: the plan is in note 199.1.")
    assert "messages omitted" in text
    one = render_transcript(long_history(1))
    assert "Assistant called read_note(" in one and "Tool read_note (success):" in one
    tool_line = next(line for line in one.splitlines() if line.startswith("Tool "))
    assert len(tool_line) < 400


def test_compression_event_shape() -> None:
    c = Compression(
        rounds_total=3,
        rounds_summarised=1,
        rounds_kept=2,
        messages_summarised=2,
        first_kept_index=2,
        summary="s",
        summary_source="extract",
        tool_facts=[{"tool_name": "t", "tool_call_id": "c", "success": True}],
    )
    event = c.to_event()
    assert event["tool_facts"] == [{"tool_name": "t", "tool_call_id": "c", "success": True}]
    assert set(event) >= {
        "rounds_total",
        "rounds_summarised",
        "rounds_kept",
        "messages_summarised",
        "first_kept_index",
        "summary",
        "summary_source",
        "tool_facts",
        "tokens_before",
        "tokens_after",
        "usage_ratio_before",
        "usage_ratio_after",
        "target_met",
    }
    assert estimate_tokens(json.dumps(event)) > 0


@pytest.mark.anyio
async def test_a_long_model_summary_is_bounded() -> None:
    cb = ContextBuilder()
    history = long_history(30)
    window = window_for(cb, history, 0.9)
    new, comp = await cb.compress(build(cb, history, window), summariser("fact " * 20_000)[0], context_window=window)
    assert comp.summary_source == "model" and comp.summary.startswith("fact fact")
    assert estimate_tokens(comp.summary) <= 1_300
    assert comp.target_met and new.usage_ratio < 0.5
