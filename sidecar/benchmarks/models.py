"""Benchmark wire types (phase-2 §9): datasets and their cases, run creation, the BenchmarkRun, metrics, reports.

Field names are the seed's. Cases and corpus notes refuse unknown keys (a typo in a dataset is an error, not a
silently ignored expectation); the Metona additions to the §9.3 agent case (``mock_script``, ``fixtures``,
``expected_arguments``) are documented in ipc_schema/README.md.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sidecar.core.common import CursorParams, ErrorInfo, PageParams, Params, Phase2Model
from sidecar.core.errors import BadRequestError
from sidecar.jobs.models import JobProgress
from sidecar.retrieval.models import EmbedderConfig, SearchMode

DatasetKind = Literal["rag", "agent"]
RunStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
CaseStatus = Literal["passed", "failed", "error"]

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

AGENT_CONDITIONS: dict[str, str] = {
    "citation_required": "bool: the run cited at least one note passage (a Citation event)",
    "cited_note_ids": "list of note ids the run's citations must include",
    "output_contains": "list of strings the final answer must contain (case-insensitive)",
    "no_tool_calls": "bool: the run called no tool at all (irrelevance cases)",
    "files_written": "list of {path, contains?}: files the run must have written in its workspace",
    "files_unchanged": "list of fixture paths that must be byte-for-byte unchanged after the run",
    "max_steps": "int: the run used at most this many ReAct iterations",
    "status": "the run's expected end status (default completed)",
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


# -- dataset files ------------------------------------------------------------------------------------------


class DatasetManifest(_Strict):
    """``<dataset_id>/dataset.json``."""

    dataset_id: str = Field(pattern=ID_PATTERN)
    kind: DatasetKind
    version: str = Field(min_length=1, max_length=50)
    description: str = Field("", max_length=2000)


class CorpusBlock(_Strict):
    block_id: str = Field(pattern=ID_PATTERN)
    text: str = Field(min_length=1, max_length=100_000)


class CorpusNote(_Strict):
    """One line of ``corpus.jsonl``: a note of the isolated vault, its ids kept as given."""

    note_id: str = Field(pattern=ID_PATTERN)
    title: str = Field(min_length=1, max_length=500)
    folder: str | None = Field(None, max_length=500)
    blocks: list[CorpusBlock] = Field(min_length=1, max_length=1000)


class RagCase(_Strict):
    """phase-2 §9.2."""

    case_id: str = Field(pattern=ID_PATTERN)
    query: str = Field(min_length=1, max_length=4000)
    expected_note_ids: list[str] = Field(min_length=1, max_length=100)
    expected_block_ids: list[str] = Field(default_factory=list, max_length=100)
    citation_required: bool = False
    tags: list[str] = Field(default_factory=list, max_length=50)


class FixtureFile(_Strict):
    path: str = Field(min_length=1, max_length=300)
    content: str = Field(max_length=1_000_000)


class AgentFixtures(_Strict):
    """What the case's isolated workspace holds before the run (files relative to the workspace root)."""

    files: list[FixtureFile] = Field(default_factory=list, max_length=100)


class AgentCase(_Strict):
    """phase-2 §9.3, plus ``mock_script`` (the scripted ``mock`` provider's turns for this case), ``fixtures``
    (workspace files) and ``expected_arguments`` (tool name → arguments its calls must carry, a subset match)."""

    case_id: str = Field(pattern=ID_PATTERN)
    prompt: str = Field(min_length=1, max_length=20_000)
    allowed_tools: list[str] | None = Field(None, max_length=100)
    expected_tools: list[str] = Field(default_factory=list, max_length=100)
    expected_conditions: dict[str, Any] = Field(default_factory=dict)
    expected_arguments: dict[str, dict[str, Any]] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list, max_length=50)
    mock_script: dict[str, Any] | None = None
    fixtures: AgentFixtures | None = None

    @field_validator("expected_conditions")
    @classmethod
    def _known_conditions(cls, v: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(v) - set(AGENT_CONDITIONS))
        if unknown:
            raise ValueError(f"unknown condition(s) {', '.join(unknown)}; known: {', '.join(AGENT_CONDITIONS)}")
        return v


# -- datasets/list ------------------------------------------------------------------------------------------


class DatasetListParams(Params):
    kind: DatasetKind | None = None


class DatasetInfo(Phase2Model):
    dataset_id: str
    kind: DatasetKind
    version: str
    description: str
    case_count: int
    content_hash: str
    source: Literal["builtin", "imported"]
    note_count: int = 0


class DatasetProblem(Phase2Model):
    """A dataset folder that failed validation (listed, never run)."""

    dataset_id: str
    source: Literal["builtin", "imported"]
    error: ErrorInfo


class DatasetList(Phase2Model):
    items: list[DatasetInfo]
    invalid: list[DatasetProblem] = Field(default_factory=list)


# -- run creation -------------------------------------------------------------------------------------------


class _RunParams(Params):
    """Bad run options answer ``BENCHMARK_CONFIG_INVALID`` (phase-2 §9.8) with the fields, not a generic
    validation error."""

    @model_validator(mode="wrap")
    @classmethod
    def _config_invalid(cls, data: Any, handler: Any) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            errors = [{"field": ".".join(str(p) for p in e["loc"]), "type": e["type"]} for e in exc.errors()]
            raise BadRequestError(
                f"Invalid benchmark options: {', '.join(e['field'] or '(root)' for e in errors[:5])}.",
                code="BENCHMARK_CONFIG_INVALID",
                details={"errors": errors[:50]},
            ) from None


class RetrievalOverrides(Params):
    """§9.4 ``retrieval``: fields given here override the RetrievalProfile for this run (and are recorded)."""

    top_k: int | None = Field(None, ge=1, le=100, description="k of recall@k and the depth searched (default 10)")
    fts_recall: int | None = Field(None, ge=1, le=1000)
    vector_recall: int | None = Field(None, ge=1, le=1000)
    rrf_k: int | None = Field(None, ge=1, le=1_000_000)  # 1/(k + rank) must stay a float
    rerank: bool | None = None
    rerank_candidates: int | None = Field(None, ge=1, le=1000)
    context_top_k: int | None = Field(None, ge=1, le=1000)
    score_threshold: float | None = None


class RagRunCreateParams(_RunParams):
    """§9.4."""

    dataset_id: str = Field(min_length=1, max_length=128)
    modes: list[SearchMode] = Field(
        default_factory=lambda: list[SearchMode](["fts", "vector", "hybrid"]), min_length=1, max_length=3
    )
    profile_id: str | None = Field(None, max_length=100, description="default: default-v2")
    retrieval: RetrievalOverrides | None = None
    embedder: EmbedderConfig | None = Field(None, description="default: the embedder configured for the index")
    repeat: int = Field(1, ge=1, le=20)
    case_ids: list[str] | None = Field(None, min_length=1, max_length=10_000, description="only these cases")
    metadata: dict[str, Any] = Field(default_factory=dict)


class AgentRunCreateParams(_RunParams):
    """§9.5; ``repeat`` runs every case that many times (pass^k for k = 1..repeat)."""

    dataset_id: str = Field(min_length=1, max_length=128)
    provider_id: str = Field("mock", min_length=1, max_length=64)
    model: str | None = Field(None, min_length=1, max_length=256)
    skill_id: str | None = Field(None, max_length=128)
    max_steps: int = Field(10, ge=1, le=200)
    token_budget: int | None = Field(20_000, ge=1, le=2**53)
    concurrency: int = Field(1, ge=1, le=8)
    repeat: int = Field(1, ge=1, le=10)
    case_ids: list[str] | None = Field(None, min_length=1, max_length=10_000, description="only these cases")
    metadata: dict[str, Any] = Field(default_factory=dict)


# -- runs ---------------------------------------------------------------------------------------------------


class BenchmarkRun(Phase2Model):
    """§9.6. ``metrics``: rag → ``{mode: RagMetrics}``; agent → AgentMetrics (set once the run ended)."""

    run_id: str
    kind: DatasetKind
    dataset_id: str
    dataset_hash: str
    status: RunStatus
    progress: JobProgress | None
    metrics: dict[str, Any] | None
    config_snapshot: dict[str, Any]
    error: ErrorInfo | None
    created_at: str
    started_at: str | None
    completed_at: str | None


class RunListParams(PageParams):
    kind: DatasetKind | None = None
    status: RunStatus | None = None


class RunIdParams(Params):
    run_id: str = Field(min_length=1, max_length=200)


class RunEventsParams(CursorParams):
    run_id: str = Field(min_length=1, max_length=200)


class ReportParams(Params):
    run_id: str = Field(min_length=1, max_length=200)
    compare_to: str | None = Field(None, min_length=1, max_length=200, description="a previous run to diff against")


# -- metrics and reports ------------------------------------------------------------------------------------


class Spread(Phase2Model):
    """Across the repeats of a run (``repeat`` > 1): each repeat's value, min, max and standard deviation."""

    values: list[float]
    min: float
    max: float
    stdev: float


class RagMetrics(Phase2Model):
    """§9.7 RAG metrics of one mode, plus ``ndcg_at_10``. Every case counts: an errored case scores 0."""

    hit_at_1: float
    hit_at_5: float
    recall_at_k: float
    mrr: float
    citation_hit_rate: float | None
    p50_latency_ms: float | None
    p95_latency_ms: float | None
    ndcg_at_10: float
    k: int
    case_count: int
    failed_count: int
    error_count: int
    ci95: dict[str, list[float]] = Field(default_factory=dict)
    """95 % confidence interval (normal approximation over cases) of each rate."""
    spread: dict[str, Spread] = Field(default_factory=dict)


class AgentMetrics(Phase2Model):
    """§9.7 agent metrics, plus pass^k (τ-bench) when ``repeat`` > 1. Every case counts: an errored one fails."""

    task_success_rate: float
    tool_selection_accuracy: float
    tool_argument_accuracy: float | None
    invalid_tool_call_rate: float
    average_steps: float
    average_latency_ms: float
    average_token_usage: float
    case_count: int
    failed_count: int
    error_count: int
    pass_hat_k: dict[str, float] = Field(default_factory=dict)
    ci95: dict[str, list[float]] = Field(default_factory=dict)
    overhead_ms_per_case: float | None = None
    """The benchmark's own time per case beyond the agent run (fixtures, trace reads, scoring)."""


class CaseResult(Phase2Model):
    """One case (of one mode and repeat). ``status``: passed, failed (scored, below the bar) or error (could not
    be scored: counted as a failure). ``failure_reason`` says why whenever it is not passed."""

    case_id: str
    mode: str | None = None
    repeat: int = 0
    status: CaseStatus
    failure_reason: str | None = None
    error: ErrorInfo | None = None
    tags: list[str] = Field(default_factory=list)
    latency_ms: float | None = None
    scores: dict[str, float | None] = Field(default_factory=dict)
    details: dict[str, Any] = Field(default_factory=dict)
    trace_run_id: str | None = None


class BenchmarkReport(Phase2Model):
    """§9.7 "报告": the run, its metrics, every case's result, the failures with reasons, per-tag metrics."""

    run: BenchmarkRun
    metrics: dict[str, Any] | None
    by_tag: dict[str, dict[str, Any]]
    cases: list[CaseResult]
    failures: list[CaseResult]
    comparison: dict[str, Any] | None = None
