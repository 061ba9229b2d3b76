"""Metric definitions, pure functions (no I/O): one place for the service, the CLI and the reports.

RAG (BEIR/MTEB conventions, relevance at the note level, binary): the ranked list is the search's blocks mapped
to their notes, first occurrence kept. ``hit@n``: an expected note within the first n; ``recall@k``: the share of
expected notes within the first k; ``MRR``: 1/rank of the first expected note (0 if none within the searched
depth); ``nDCG@10``: DCG of the binary gains over the ideal ordering. ``citation hit``: for cases with
``citation_required``, an expected block (or, without expected blocks, an expected note's block) is among the
first ``context_top_k`` blocks — the passages a RAG answer would cite. Latency percentiles: linear interpolation.

Every case counts in every average: a case that errored scores 0 (never dropped); latency percentiles are over
the searches that returned.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from .models import AgentMetrics, CaseResult, RagCase, RagMetrics, Spread

RAG_RATES = ("hit_at_1", "hit_at_5", "recall_at_k", "mrr", "citation_hit_rate", "ndcg_at_10")
AGENT_RATES = ("task_success_rate", "tool_selection_accuracy", "tool_argument_accuracy", "invalid_tool_call_rate")


def percentile(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return round(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo), 3)


def ci95(values: Sequence[float]) -> list[float]:
    """Normal-approximation 95 % interval of the mean, clipped to [0, 1] (rates)."""
    if not values:
        return [0.0, 0.0]
    mean = statistics.fmean(values)
    half = 1.96 * math.sqrt(statistics.pvariance(values) / len(values)) if len(values) > 1 else 0.0
    return [round(max(0.0, mean - half), 4), round(min(1.0, mean + half), 4)]


def note_ranking(hits: Iterable[tuple[str, str]]) -> list[str]:
    seen: dict[str, None] = {}
    for note_id, _block in hits:
        seen.setdefault(note_id, None)
    return list(seen)


def score_rag_case(case: RagCase, hits: Sequence[tuple[str, str]], k: int, context_top_k: int) -> dict[str, Any]:
    """Scores of one search: ``hits`` are (note_id, block_id) in rank order."""
    notes = note_ranking(hits)
    expected = set(case.expected_note_ids)
    rank = next((i for i, n in enumerate(notes, start=1) if n in expected), None)
    dcg = sum(1.0 / math.log2(i + 1) for i, n in enumerate(notes[:10], start=1) if n in expected)
    idcg = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(expected), 10) + 1))
    citation: float | None = None
    if case.citation_required:
        cited = hits[:context_top_k]
        if case.expected_block_ids:
            ok = any(b in case.expected_block_ids for _n, b in cited)
        else:
            ok = any(n in expected for n, _b in cited)
        citation = 1.0 if ok else 0.0
    return {
        "hit_at_1": 1.0 if rank == 1 else 0.0,
        "hit_at_5": 1.0 if rank is not None and rank <= 5 else 0.0,
        "recall_at_k": len(expected & set(notes[:k])) / len(expected),
        "mrr": 1.0 / rank if rank else 0.0,
        "citation_hit_rate": citation,
        "ndcg_at_10": dcg / idcg if idcg else 0.0,
        "rank": rank,
    }


def rag_failure(scores: dict[str, Any]) -> str | None:
    if not scores["hit_at_5"]:
        rank = scores["rank"]
        return "no expected note in the top 5" if rank is None else f"first expected note at rank {rank}"
    if scores["citation_hit_rate"] == 0.0:
        return "the expected passage is not among the cited blocks (context_top_k)"
    return None


def _rate(results: Sequence[CaseResult], name: str) -> tuple[float | None, list[float]]:
    """Mean of a score over the results it applies to (``None``: not applicable, e.g. citation_hit_rate of a case
    without ``citation_required``). An errored result carries explicit zeros, so it is never skipped."""
    values = [float(v) for r in results if (v := r.scores.get(name)) is not None]
    return (round(statistics.fmean(values), 4) if values else None), values


def _spread(per_repeat: list[float]) -> Spread:
    return Spread(
        values=[round(v, 4) for v in per_repeat],
        min=round(min(per_repeat), 4),
        max=round(max(per_repeat), 4),
        stdev=round(statistics.pstdev(per_repeat), 4),
    )


def rag_metrics(results: Sequence[CaseResult], k: int) -> RagMetrics:
    """Aggregate one mode's results (all repeats)."""
    out: dict[str, Any] = {}
    cis: dict[str, list[float]] = {}
    for name in RAG_RATES:
        mean, values = _rate(results, name)
        out[name] = mean if mean is not None or name == "citation_hit_rate" else 0.0
        if values:
            cis[name] = ci95(values)
    latencies = [r.latency_ms for r in results if r.latency_ms is not None and r.status != "error"]
    repeats = sorted({r.repeat for r in results})
    spread: dict[str, Spread] = {}
    if len(repeats) > 1:
        for name in (*RAG_RATES, "p50_latency_ms"):
            per: list[float] = []
            for rep in repeats:
                chunk = [r for r in results if r.repeat == rep]
                if name == "p50_latency_ms":
                    value = percentile([r.latency_ms for r in chunk if r.latency_ms is not None], 0.5)
                else:
                    value = _rate(chunk, name)[0]
                if value is not None:
                    per.append(value)
            if per:
                spread[name] = _spread(per)
    return RagMetrics(
        **out,
        p50_latency_ms=percentile(latencies, 0.5),
        p95_latency_ms=percentile(latencies, 0.95),
        k=k,
        case_count=len(results),
        failed_count=sum(r.status != "passed" for r in results),
        error_count=sum(r.status == "error" for r in results),
        ci95=cis,
        spread=spread,
    )


def pass_hat_k(successes: dict[str, list[bool]]) -> dict[str, float]:
    """τ-bench's pass^k: per task, C(c, k) / C(n, k) over its n trials with c successes, averaged; k = 1..n."""
    if not successes:
        return {}
    n = min(len(v) for v in successes.values())
    out: dict[str, float] = {}
    for k in range(1, n + 1):
        vals = [math.comb(sum(v[:n]), k) / math.comb(n, k) for v in successes.values()]
        out[str(k)] = round(statistics.fmean(vals), 4)
    return out


def agent_metrics(results: Sequence[CaseResult], overhead_ms: Sequence[float] = ()) -> AgentMetrics:
    out: dict[str, Any] = {}
    cis: dict[str, list[float]] = {}
    for name in ("task_success_rate", "tool_selection_accuracy"):
        mean, values = _rate(results, name)
        out[name] = mean or 0.0
        cis[name] = ci95(values)
    # argument accuracy and invalid-call rate are over tool calls (micro averages), from each case's counts
    calls = sum(int(r.details.get("tool_calls", 0)) for r in results)
    checked = sum(int(r.details.get("arguments_checked", 0)) for r in results)
    correct = sum(int(r.details.get("arguments_correct", 0)) for r in results)
    invalid_calls = sum(int(r.details.get("invalid_tool_calls", 0)) for r in results)
    n = len(results) or 1
    successes: dict[str, list[bool]] = {}
    for r in sorted(results, key=lambda r: r.repeat):
        successes.setdefault(r.case_id, []).append(r.status == "passed")
    repeats = {r.repeat for r in results}
    return AgentMetrics(
        task_success_rate=out["task_success_rate"],
        tool_selection_accuracy=out["tool_selection_accuracy"],
        tool_argument_accuracy=round(correct / checked, 4) if checked else None,
        invalid_tool_call_rate=round(invalid_calls / calls, 4) if calls else 0.0,
        average_steps=round(sum(float(r.details.get("steps", 0)) for r in results) / n, 3),
        average_latency_ms=round(sum(r.latency_ms or 0.0 for r in results) / n, 3),
        average_token_usage=round(sum(float(r.details.get("token_usage", 0)) for r in results) / n, 3),
        case_count=len(results),
        failed_count=sum(r.status != "passed" for r in results),
        error_count=sum(r.status == "error" for r in results),
        pass_hat_k=pass_hat_k(successes) if len(repeats) > 1 else {},
        ci95=cis,
        overhead_ms_per_case=round(statistics.fmean(overhead_ms), 3) if overhead_ms else None,
    )


def by_tag(results: Sequence[CaseResult], kind: str, k: int = 10) -> dict[str, dict[str, Any]]:
    """Metrics per tag (rag: per mode within each tag)."""
    tags = sorted({t for r in results for t in r.tags})
    out: dict[str, dict[str, Any]] = {}
    for tag in tags:
        chunk = [r for r in results if tag in r.tags]
        if kind == "rag":
            modes = sorted({r.mode or "" for r in chunk})
            out[tag] = {
                m: rag_metrics([r for r in chunk if r.mode == m], k).model_dump(exclude={"ci95", "spread"})
                for m in modes
            }
        else:
            out[tag] = agent_metrics(chunk).model_dump(exclude={"ci95", "pass_hat_k", "overhead_ms_per_case"})
    return out
