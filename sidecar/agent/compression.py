"""Context compression: rounds, the summariser's transcript, tool facts, the summary message and the plan.

Compression follows the IR standard's 上下文压缩策略 (📋 MetonaContext):

1. the last ``keep_rounds`` rounds stay verbatim;
2. the earlier rounds become ONE summary message (role ``user``, content starting with :data:`SUMMARY_HEADER`);
3. it lists every earlier tool call as name + status only (success/failed), never the full output. These facts
   are extracted deterministically *first*; the model's summary of the dialogue comes *second*, and when the
   model fails an extractive summary stands in (what users hate most about compaction is losing facts);
4. the system prompt and the injected memories are kept unchanged;
5. the estimate is recomputed and must fall under ``target`` (0.5): if not, older tool results in the kept rounds
   are reduced to name + status + a short summary, then fewer rounds are kept (always the newest), then the kept
   tool results are truncated harder. ``Compression.target_met`` says whether that worked.

Nothing is destroyed: :func:`compress` (behind :meth:`ContextBuilder.compress
<sidecar.agent.context.ContextBuilder.compress>`) returns a new context and a :class:`Compression` record for the
trace (``first_kept_index`` points into the original history, which stays in the trace journal).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from sidecar.ir import MetonaContext, MetonaMemoryItem, MetonaMessage, MetonaSystemPrompt, MetonaToolDef
from sidecar.providers.base import tool_text

from .tokens import (
    TokenCalibrator,
    estimate_message_tokens,
    estimate_system_prompt_tokens,
    estimate_tokens,
    estimate_tools_tokens,
)

__all__ = [
    "SUMMARISE_INSTRUCTIONS",
    "SUMMARY_HEADER",
    "Compression",
    "Estimator",
    "SummarySource",
    "compress",
    "one_line",
    "render_transcript",
    "split_rounds",
]

logger = logging.getLogger(__name__)

SUMMARY_HEADER = "[Summary of the earlier conversation]"
"""The first line of the summary message that replaces compressed rounds."""

SUMMARISE_INSTRUCTIONS = (
    "Summarise the conversation transcript below for your own later use; the original messages will be removed "
    "from your context. Keep every fact that may still matter: the user's requests and preferences, decisions, "
    "names, numbers, file paths, note titles, sources found, results of tools, open questions and what remains "
    "to do. Write in the language of the conversation, as a compact list, without preamble."
)
"""Suggested system instruction for the model call behind ``compress``'s ``summarise`` callable."""

SummarySource = Literal["model", "extract", "none"]
_NONE: SummarySource = "none"

_TOOL_FACTS_HEADER = "Tool calls (name: status; outputs omitted):"
_SUMMARY_LABEL = "Summary:"
_FACT_LINE = re.compile(r"^- (?P<name>.+?): (?P<status>success|failed)(?: ×(?P<count>\d+))?$")

_TRANSCRIPT_MAX_CHARS = 24_000
_TRANSCRIPT_TEXT_CHARS = 2_000
_TRANSCRIPT_TOOL_CHARS = 300
_TRANSCRIPT_ARGS_CHARS = 200
_SUMMARY_MAX_TOKENS = 1_200
_EXTRACT_USER_CHARS = 200
_EXTRACT_ASSISTANT_CHARS = 300
_EXTRACT_MAX_LINES = 30
_REDUCED_TOOL_CHARS = 500
_HARD_TOOL_CHARS = 100
_MIN_LAST_TOOL_CHARS = 200


# ---------------------------------------------------------------- rounds and transcripts


def split_rounds(messages: list[MetonaMessage]) -> list[list[MetonaMessage]]:
    """Group ``messages`` into rounds: a ``user`` message; an ``assistant`` message with the ``tool`` messages
    that follow it; a ``system`` message on its own. An assistant's tool calls are never separated from their
    results. Orphan ``tool`` messages (no assistant before them) join the previous round, or form the first
    round when the history starts with them."""
    rounds: list[list[MetonaMessage]] = []
    current: list[MetonaMessage] | None = None  # the open assistant round, which tool messages may join
    for m in messages:
        if m.role == "tool":
            if current is not None:
                current.append(m)
            elif rounds:
                rounds[-1].append(m)
            else:
                current = [m]
                rounds.append(current)
            continue
        current = [m]
        rounds.append(current)
        if m.role != "assistant":
            current = None
    return rounds


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + "…"


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` characters."""
    return _cut(" ".join(text.split()), limit)


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _status(success: bool) -> str:
    return "success" if success else "failed"


def _is_summary(m: MetonaMessage) -> bool:
    return m.role == "user" and m.content.startswith(SUMMARY_HEADER)


def _summary_body(m: MetonaMessage) -> str:
    """The dialogue part of an earlier summary message (after ``Summary:``), or all of it without the header."""
    text = m.content[len(SUMMARY_HEADER) :]
    marker = f"\n{_SUMMARY_LABEL}\n"
    pos = text.find(marker)
    return (text[pos + len(marker) :] if pos >= 0 else text).strip()


def _render_line(m: MetonaMessage) -> str:
    if _is_summary(m):
        return f"Earlier summary: {_cut(_summary_body(m), _TRANSCRIPT_TEXT_CHARS * 2)}"
    if m.role == "tool":
        result = m.tool_result
        name = result.tool_name if result else "tool"
        status = _status(result.success) if result else "unknown"
        return f"Tool {name} ({status}): {one_line(tool_text(m), _TRANSCRIPT_TOOL_CHARS)}"
    label = {"user": "User", "assistant": "Assistant", "system": "System"}[m.role]
    parts = [f"{label}: {_cut(m.content, _TRANSCRIPT_TEXT_CHARS)}"] if m.content.strip() else []
    parts.extend(
        f"{label} called {c.name}({one_line(_json(c.args), _TRANSCRIPT_ARGS_CHARS)})" for c in m.tool_calls or ()
    )
    return "\n".join(parts)


def render_transcript(messages: list[MetonaMessage], *, max_chars: int = _TRANSCRIPT_MAX_CHARS) -> str:
    """A plain-text transcript of ``messages`` for the summariser, bounded to about ``max_chars``: long texts
    are cut, tool results are reduced to their summary's first characters, thinking is left out, and when the
    whole is still too long the middle is dropped (the beginning and, mostly, the end are kept)."""
    lines = [line for line in (_render_line(m) for m in messages) if line]
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    head_budget, tail_budget = max_chars // 4, max_chars - max_chars // 4
    head: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > head_budget:
            break
        head.append(line)
        used += len(line) + 1
    tail: list[str] = []
    used = 0
    for line in reversed(lines[len(head) :]):
        if used + len(line) + 1 > tail_budget:
            break
        tail.append(line)
        used += len(line) + 1
    tail.reverse()
    if not head and not tail:  # a single huge line
        return _cut(text, max_chars)
    omitted = len(lines) - len(head) - len(tail)
    return "\n".join([*head, f"[… {omitted} messages omitted …]", *tail])


# ---------------------------------------------------------------- the compression record


@dataclass
class Compression:
    """What one compression did: the trace event ``context_compressed`` carries :meth:`to_event`."""

    rounds_total: int
    rounds_summarised: int
    rounds_kept: int
    messages_summarised: int
    first_kept_index: int
    """Index, into the history given to ``compress``, of the first message kept (verbatim or reduced)."""
    summary: str
    """The dialogue summary (model or extract); the summary message also holds the tool facts."""
    summary_source: SummarySource
    """``none`` when nothing was summarised."""
    tool_facts: list[dict[str, Any]] = field(default_factory=list)
    """Every summarised tool call: ``{"tool_name", "tool_call_id", "success"}``."""
    tokens_before: int = 0
    tokens_after: int = 0
    usage_ratio_before: float = 0.0
    usage_ratio_after: float = 0.0
    target_met: bool = True
    tool_results_reduced: int = 0
    """Tool messages in the kept rounds whose result was shortened to name + status + summary."""

    def to_event(self) -> dict[str, Any]:
        """A snake_case, JSON-able copy for a trace event."""
        return dataclasses.asdict(self)


# ---------------------------------------------------------------- tool facts


def _tool_facts(messages: Sequence[MetonaMessage]) -> list[dict[str, Any]]:
    """Every tool call in ``messages`` with its status: from the tool results, plus the calls that never got a
    result (counted as failed)."""
    facts: list[dict[str, Any]] = []
    answered = {m.tool_result.tool_call_id for m in messages if m.role == "tool" and m.tool_result is not None}
    for m in messages:
        if m.role == "assistant":
            facts.extend(
                {"tool_name": c.name, "tool_call_id": c.id, "success": False}
                for c in m.tool_calls or ()
                if c.id not in answered
            )
        elif m.role == "tool" and m.tool_result is not None:
            r = m.tool_result
            facts.append({"tool_name": r.tool_name, "tool_call_id": r.tool_call_id, "success": r.success})
    return facts


def _fact_runs(messages: Sequence[MetonaMessage]) -> list[tuple[str, str, int]]:
    """(name, status, count) runs, in order, with the runs of earlier summary messages carried forward."""
    runs: list[tuple[str, str, int]] = []

    def add(name: str, status: str, count: int) -> None:
        if runs and runs[-1][0] == name and runs[-1][1] == status:
            runs[-1] = (name, status, runs[-1][2] + count)
        else:
            runs.append((name, status, count))

    for m in messages:
        if _is_summary(m):
            for line in m.content.splitlines():
                match = _FACT_LINE.match(line)
                if match:
                    add(match["name"], match["status"], int(match["count"] or 1))
        else:
            for fact in _tool_facts([m]):
                add(fact["tool_name"], _status(fact["success"]), 1)
    return runs


def _facts_block(runs: list[tuple[str, str, int]]) -> str:
    if not runs:
        return ""
    lines = [f"- {name}: {status}" + (f" ×{count}" if count > 1 else "") for name, status, count in runs]
    return "\n".join([_TOOL_FACTS_HEADER, *lines])


def _summary_message(facts: str, summary: str, timestamp: int) -> MetonaMessage:
    parts = [SUMMARY_HEADER]
    if facts:
        parts.append(facts)
    if summary:
        parts.append(f"{_SUMMARY_LABEL}\n{summary}")
    return MetonaMessage(role="user", content="\n\n".join(parts), timestamp=timestamp)


def _extract_summary(messages: Sequence[MetonaMessage]) -> str:
    """The fallback summary: earlier summaries, user requests and assistant answers, truncated."""
    lines: list[str] = []
    for m in messages:
        if _is_summary(m):
            lines.append(f"- Earlier: {one_line(_summary_body(m), _EXTRACT_ASSISTANT_CHARS * 3)}")
        elif m.role == "user" and m.content.strip():
            lines.append(f"- User asked: {one_line(m.content, _EXTRACT_USER_CHARS)}")
        elif m.role == "assistant" and m.content.strip():
            lines.append(f"- Assistant answered: {one_line(m.content, _EXTRACT_ASSISTANT_CHARS)}")
    if len(lines) > _EXTRACT_MAX_LINES:
        head = _EXTRACT_MAX_LINES // 5
        tail = _EXTRACT_MAX_LINES - head
        lines = [*lines[:head], f"- … ({len(lines) - head - tail} more) …", *lines[-tail:]]
    return "\n".join(lines)


def _truncate_tokens(text: str, max_tokens: int) -> str:
    """``text`` cut (binary search on its length) so that it is estimated at ``max_tokens`` or fewer."""
    if estimate_tokens(text) <= max_tokens:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) + 1 <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + "…"


def _reduce_tool(m: MetonaMessage, limit: int) -> MetonaMessage:
    """A copy of tool message ``m`` reduced to name + status + its summary cut to ``limit`` characters (the raw
    result is dropped from the copy; the original stays in the trace)."""
    result = m.tool_result
    if m.role != "tool" or result is None:
        return m
    text = f"[{result.tool_name}: {_status(result.success)}] {_cut(tool_text(m), limit)}".rstrip()
    if estimate_message_tokens(m) <= estimate_tokens(text) + 8:
        return m  # already small: keep it verbatim
    error = _cut(result.error, 200) if result.error else None
    reduced = result.model_copy(update={"summary": text, "result": None, "error": error})
    return m.model_copy(update={"content": "", "tool_result": reduced})


# ---------------------------------------------------------------- compress


class Estimator(Protocol):
    """What compression needs from :class:`~sidecar.agent.context.ContextBuilder`: its limits, its calibrator
    and its calibrated estimate."""

    keep_rounds: int
    threshold: float
    target: float
    calibrator: TokenCalibrator

    def estimate(
        self, prompt: MetonaSystemPrompt, history: Sequence[MetonaMessage], tools: list[MetonaToolDef]
    ) -> int: ...


async def compress(
    builder: Estimator,
    context: MetonaContext,
    summarise: Callable[[str], Awaitable[str | None]],
    *,
    context_window: int,
    prompt: MetonaSystemPrompt,
    relevant_memories: list[MetonaMemoryItem],
) -> tuple[MetonaContext, Compression]:
    """A new, smaller ``context`` (see the module docstring) and the record of what was done.

    ``prompt`` is the system prompt of the new context and ``relevant_memories`` its memories;
    ``context_window`` must be positive (:meth:`ContextBuilder.compress
    <sidecar.agent.context.ContextBuilder.compress>` checks it and resolves both). ``summarise(transcript)`` is
    the model call that summarises the earlier rounds; when it returns nothing or raises an ``Exception``, an
    extractive summary is used (cancellation propagates).
    """
    history = context.history
    tools = context.available_tools
    before = builder.estimate(context.system_prompt, history, tools)
    rounds = split_rounds(history)
    if len(rounds) <= 1:
        return context, _noop(len(rounds), before, context_window, builder.target)

    fixed = estimate_system_prompt_tokens(prompt) + estimate_tools_tokens(tools)
    plan = _Plan(builder, rounds, fixed, context_window)
    kept_count, reduce_older = plan.choose()
    earlier = [m for r in rounds[: len(rounds) - kept_count] for m in r]
    kept_rounds = rounds[len(rounds) - kept_count :]

    summary, source = "", _NONE
    facts_runs: list[tuple[str, str, int]] = []
    if earlier:
        facts_runs = _fact_runs(earlier)
        summary, source = await _summarise(earlier, summarise)
    facts = _facts_block(facts_runs)

    kept, reduced = _kept_messages(kept_rounds, older_limit=_REDUCED_TOOL_CHARS if reduce_older else None)
    summary_msg = _summary_message(facts, summary, earlier[-1].timestamp) if earlier else None
    new_history = ([summary_msg] if summary_msg else []) + kept
    after = builder.estimate(prompt, new_history, tools)

    if after / context_window >= builder.target and summary_msg is not None:
        # the model's summary came out longer than planned: cut it to what the budget leaves
        # (never below what the plan reserved for it: the kept rounds are then the problem, not the summary)
        budget = plan.summary_budget(kept, summary_msg)
        summary = _truncate_tokens(summary, max(budget, plan.dialogue_reserve(earlier)))
        summary_msg = _summary_message(facts, summary, summary_msg.timestamp)
        new_history = [summary_msg, *kept]
        after = builder.estimate(prompt, new_history, tools)
    if after / context_window >= builder.target:
        # last resort: every kept tool result cut hard, the newest round's to what the budget leaves
        head = [summary_msg] if summary_msg else []
        last_limit = plan.newest_tool_limit(head, kept_rounds)
        kept, reduced = _kept_messages(kept_rounds, older_limit=_HARD_TOOL_CHARS, last_limit=last_limit)
        new_history = head + kept
        after = builder.estimate(prompt, new_history, tools)

    ratio = after / context_window
    new_context = MetonaContext(
        id=context.id,
        session_id=context.session_id,
        system_prompt=prompt,
        history=new_history,
        relevant_memories=relevant_memories,
        current_task=context.current_task,
        available_tools=list(tools),
        estimated_tokens=after,
        usage_ratio=ratio,
        needs_compression=ratio > builder.threshold,
    )
    compression = Compression(
        rounds_total=len(rounds),
        rounds_summarised=len(rounds) - kept_count,
        rounds_kept=kept_count,
        messages_summarised=len(earlier),
        first_kept_index=len(earlier),
        summary=summary,
        summary_source=source,
        tool_facts=_tool_facts(earlier),
        tokens_before=before,
        tokens_after=after,
        usage_ratio_before=before / context_window,
        usage_ratio_after=ratio,
        target_met=ratio < builder.target,
        tool_results_reduced=reduced,
    )
    return new_context, compression


async def _summarise(
    earlier: list[MetonaMessage], summarise: Callable[[str], Awaitable[str | None]]
) -> tuple[str, SummarySource]:
    """The model's summary of ``earlier`` (bounded), or the extractive one when the model gives nothing."""
    text: str | None = None
    try:
        text = await summarise(render_transcript(earlier))
    except Exception:  # a failed summary must not fail the run; cancellation is a BaseException and passes
        logger.warning("context summariser failed; using an extractive summary", exc_info=True)
    if isinstance(text, str) and text.strip():
        return _truncate_tokens(text.strip(), _SUMMARY_MAX_TOKENS), "model"
    return _truncate_tokens(_extract_summary(earlier), _SUMMARY_MAX_TOKENS), "extract"


def _noop(rounds: int, tokens: int, window: int, target: float) -> Compression:
    ratio = tokens / window
    return Compression(
        rounds_total=rounds,
        rounds_summarised=0,
        rounds_kept=rounds,
        messages_summarised=0,
        first_kept_index=0,
        summary="",
        summary_source="none",
        tokens_before=tokens,
        tokens_after=tokens,
        usage_ratio_before=ratio,
        usage_ratio_after=ratio,
        target_met=ratio < target,
    )


class _Plan:
    """Chooses how many rounds to keep before the (single) summariser call, from the estimates: the most rounds
    (≤ ``keep_rounds``) that fit under the target verbatim, else with their older tool results reduced; then
    fewer rounds, down to the newest one. The summary is budgeted at its cap (or the transcript's size)."""

    def __init__(self, builder: Estimator, rounds: list[list[MetonaMessage]], fixed: int, window: int) -> None:
        self.builder = builder
        self.rounds = rounds
        self.fixed = fixed
        self.window = window

    def _fits(self, raw: int) -> bool:
        return self.builder.calibrator.apply(raw) / self.window < self.builder.target

    @staticmethod
    def dialogue_reserve(earlier: list[MetonaMessage]) -> int:
        """The tokens planned for the dialogue summary of ``earlier``."""
        return min(_SUMMARY_MAX_TOKENS, estimate_tokens(_extract_summary(earlier)) + 200)

    def _summary_tokens(self, earlier: list[MetonaMessage]) -> int:
        if not earlier:
            return 0
        facts = _facts_block(_fact_runs(earlier))
        return estimate_tokens(SUMMARY_HEADER + facts) + self.dialogue_reserve(earlier) + 8

    def choose(self) -> tuple[int, bool]:
        """(rounds to keep, whether to reduce the older kept tool results)."""
        total = len(self.rounds)
        most = min(self.builder.keep_rounds, total)
        if self.rounds[0][0].role == "tool":  # never let the history start with an orphan tool message
            most = min(most, total - 1)
        most = max(most, 1)
        reduce = False
        for keep in range(most, 0, -1):
            earlier = [m for r in self.rounds[: total - keep] for m in r]
            head = self.fixed + self._summary_tokens(earlier)
            kept_rounds = self.rounds[total - keep :]
            if not reduce:
                verbatim = sum(estimate_message_tokens(m) for r in kept_rounds for m in r)
                if self._fits(head + verbatim):
                    return keep, False
                reduce = True
            kept, _ = _kept_messages(kept_rounds, older_limit=_REDUCED_TOOL_CHARS)
            if self._fits(head + sum(estimate_message_tokens(m) for m in kept)):
                return keep, True
        return 1, True

    def _limit(self) -> float:
        """The raw (uncalibrated) token count that is exactly at the target."""
        return self.builder.target * self.window / self.builder.calibrator.factor

    def newest_tool_limit(self, head: list[MetonaMessage], kept_rounds: list[list[MetonaMessage]]) -> int:
        """The character limit for the newest round's tool results that makes the context fit (once everything
        else is cut hard), at least :data:`_MIN_LAST_TOOL_CHARS`."""
        kept, _ = _kept_messages(kept_rounds, older_limit=_HARD_TOOL_CHARS)
        newest = [m for m in kept_rounds[-1] if m.role == "tool" and m.tool_result is not None]
        if not newest:
            return _MIN_LAST_TOOL_CHARS
        others = self.fixed + sum(estimate_message_tokens(m) for m in [*head, *kept] if m not in newest)
        share = (self._limit() - 1 - others) / len(newest) - 16  # 16: the "[name: status]" prefix, overhead
        limits = []
        for m in newest:
            text = tool_text(m)
            tokens = max(1, estimate_tokens(text))
            limits.append(int(len(text) * min(1.0, max(0.0, share) / tokens)))
        return max(_MIN_LAST_TOOL_CHARS, min(limits))

    def summary_budget(self, kept: list[MetonaMessage], summary_msg: MetonaMessage) -> int:
        """How many tokens the dialogue summary may take for the context to fall under the target."""
        calibrated_limit = self._limit()
        used = self.fixed + sum(estimate_message_tokens(m) for m in kept) + estimate_message_tokens(summary_msg)
        body = _summary_body(summary_msg)
        return int(calibrated_limit - 1 - (used - estimate_tokens(body)))


def _kept_messages(
    kept_rounds: list[list[MetonaMessage]], *, older_limit: int | None, last_limit: int | None = None
) -> tuple[list[MetonaMessage], int]:
    """The kept rounds' messages, with the tool results of the rounds before the newest reduced to
    ``older_limit`` characters (and the newest round's to ``last_limit``) when given; + how many were reduced."""
    out: list[MetonaMessage] = []
    reduced = 0
    for i, r in enumerate(kept_rounds):
        limit = last_limit if i == len(kept_rounds) - 1 else older_limit
        for m in r:
            new = _reduce_tool(m, limit) if limit is not None and m.role == "tool" else m
            reduced += new is not m
            out.append(new)
    return out, reduced
