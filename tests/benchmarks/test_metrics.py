"""Metric definitions on hand-checked inputs (BEIR-style note-level relevance, τ-bench pass^k)."""

from __future__ import annotations

import math

import pytest

from sidecar.benchmarks.metrics import agent_metrics, pass_hat_k, percentile, rag_metrics, score_rag_case
from sidecar.benchmarks.models import CaseResult, RagCase


def _case(**kw):  # type: ignore[no-untyped-def]
    base = {
        "case_id": "c",
        "query": "q",
        "expected_note_ids": ["a"],
        "expected_block_ids": ["a1"],
        "citation_required": True,
    }
    return RagCase.model_validate({**base, **kw})


def test_rank_metrics_on_notes_first_occurrence() -> None:
    hits = [("x", "x1"), ("x", "x2"), ("a", "a2"), ("a", "a1")]
    s = score_rag_case(_case(), hits, k=10, context_top_k=3)
    assert s["rank"] == 2 and s["hit_at_1"] == 0.0 and s["hit_at_5"] == 1.0 and s["mrr"] == 0.5
    assert s["ndcg_at_10"] == pytest.approx(1 / math.log2(3))
    assert s["citation_hit_rate"] == 0.0, "a1 is 4th, beyond context_top_k=3"
    assert score_rag_case(_case(), hits, k=10, context_top_k=4)["citation_hit_rate"] == 1.0


def test_recall_at_k_and_multi_relevant_ndcg() -> None:
    case = _case(expected_note_ids=["a", "b"], expected_block_ids=[], citation_required=False)
    s = score_rag_case(case, [("a", "a1"), ("x", "x1"), ("b", "b1")], k=2, context_top_k=8)
    assert s["recall_at_k"] == 0.5 and s["citation_hit_rate"] is None
    assert s["ndcg_at_10"] == pytest.approx((1 + 1 / 2) / (1 + 1 / math.log2(3)))
    assert score_rag_case(case, [], k=2, context_top_k=8)["mrr"] == 0.0


def test_errored_cases_count_as_zero_never_skipped() -> None:
    ok = CaseResult(
        case_id="a",
        mode="fts",
        status="passed",
        latency_ms=10.0,
        scores={
            "hit_at_1": 1.0,
            "hit_at_5": 1.0,
            "recall_at_k": 1.0,
            "mrr": 1.0,
            "ndcg_at_10": 1.0,
            "citation_hit_rate": 1.0,
        },
    )
    bad = CaseResult(
        case_id="b",
        mode="fts",
        status="error",
        scores={
            "hit_at_1": 0.0,
            "hit_at_5": 0.0,
            "recall_at_k": 0.0,
            "mrr": 0.0,
            "ndcg_at_10": 0.0,
            "citation_hit_rate": 0.0,
        },
    )
    m = rag_metrics([ok, bad], k=10)
    assert m.hit_at_5 == 0.5 and m.citation_hit_rate == 0.5 and m.case_count == 2
    assert m.error_count == 1 and m.failed_count == 1 and m.p50_latency_ms == 10.0


def test_percentiles_and_spread() -> None:
    assert percentile([1, 2, 3, 4], 0.5) == 2.5 and percentile([5.0], 0.95) == 5.0 and percentile([], 0.5) is None
    results = [
        CaseResult(
            case_id=c,
            mode="fts",
            repeat=r,
            status="passed",
            latency_ms=1.0,
            scores={"hit_at_1": v, "hit_at_5": 1.0, "recall_at_k": 1.0, "mrr": v, "ndcg_at_10": v},
        )
        for r, v in ((0, 1.0), (1, 0.0))
        for c in ("x", "y")
    ]
    m = rag_metrics(results, k=10)
    assert m.spread["hit_at_1"].values == [1.0, 0.0] and m.spread["hit_at_1"].stdev == 0.5
    assert m.citation_hit_rate is None


def test_pass_hat_k() -> None:
    # task A: 2/3 successes, task B: 3/3 → pass^1 = (2/3 + 1)/2, pass^2 = (1/3 + 1)/2, pass^3 = (0 + 1)/2
    got = pass_hat_k({"A": [True, False, True], "B": [True, True, True]})
    assert got == {"1": round((2 / 3 + 1) / 2, 4), "2": round((1 / 3 + 1) / 2, 4), "3": 0.5}


def test_agent_metrics_micro_averages() -> None:
    a = CaseResult(
        case_id="a",
        status="passed",
        latency_ms=100.0,
        scores={"task_success_rate": 1.0, "tool_selection_accuracy": 1.0},
        details={
            "tool_calls": 3,
            "invalid_tool_calls": 1,
            "arguments_checked": 2,
            "arguments_correct": 1,
            "steps": 3,
            "token_usage": 300,
        },
    )
    b = CaseResult(
        case_id="b",
        status="error",
        latency_ms=0.0,
        scores={"task_success_rate": 0.0, "tool_selection_accuracy": 0.0},
        details={"tool_calls": 0, "invalid_tool_calls": 0, "steps": 0, "token_usage": 0},
    )
    m = agent_metrics([a, b])
    assert (m.task_success_rate, m.tool_selection_accuracy, m.tool_argument_accuracy) == (0.5, 0.5, 0.5)
    assert m.invalid_tool_call_rate == round(1 / 3, 4) and m.average_steps == 1.5 and m.average_latency_ms == 50.0
    assert m.error_count == 1 and m.pass_hat_k == {}
