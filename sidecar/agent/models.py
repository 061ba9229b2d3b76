"""``agent/*`` and ``tools/list`` params and results (phase-2 §6: snake_case; IR objects stay camelCase)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from sidecar.core.common import CursorParams, ErrorInfo, Page, PageParams, Params, Phase2Model
from sidecar.ir import MetonaRequest, MetonaToolDef
from sidecar.trace.models import StoredEvent

RunStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
ACTIVE_RUN_STATUSES: tuple[str, ...] = ("queued", "running")
PermissionDecision = Literal["allow_once", "allow_always", "deny"]

# AgentEvent names (phase-2 §6.1; the second group is new in phase 2)
RUN_STARTED = "RunStarted"
TEXT_DELTA = "TextDelta"
THINKING_DELTA = "ThinkingDelta"
TOOL_CALL = "ToolCall"
TOOL_RESULT = "ToolResult"
PERMISSION_REQUIRED = "PermissionRequired"
USAGE = "Usage"
CITATION = "Citation"
RUN_COMPLETED = "RunCompleted"
RUN_FAILED = "RunFailed"
RUN_CANCELLED = "RunCancelled"
MODEL_CALL_STARTED = "ModelCallStarted"
MODEL_CALL_COMPLETED = "ModelCallCompleted"
MODEL_CALL_FAILED = "ModelCallFailed"
PERMISSION_RESOLVED = "PermissionResolved"
# Metona additions (an unknown event name is a client's `unknown` fallback, seed §4.1)
CONTEXT_COMPRESSED = "ContextCompressed"
LOOP_DETECTED = "LoopDetected"
PROVIDER_RETRY = "ProviderRetry"
PROVIDER_SWITCHED = "ProviderSwitched"

AGENT_EVENTS: tuple[str, ...] = (
    RUN_STARTED,
    TEXT_DELTA,
    THINKING_DELTA,
    TOOL_CALL,
    TOOL_RESULT,
    PERMISSION_REQUIRED,
    USAGE,
    CITATION,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_CANCELLED,
    MODEL_CALL_STARTED,
    MODEL_CALL_COMPLETED,
    MODEL_CALL_FAILED,
    PERMISSION_RESOLVED,
    CONTEXT_COMPRESSED,
    LOOP_DETECTED,
    PROVIDER_RETRY,
    PROVIDER_SWITCHED,
)


class AgentRunCreateParams(Params):
    provider_id: str | None = Field(None, min_length=1, max_length=64, description="default: llm.defaultProvider")
    model: str | None = Field(None, min_length=1, max_length=256, description="default: the provider's default_model")
    request: MetonaRequest
    """The conversation so far (its last user message is the task), system prompt, tool filter and generation
    params; ``params.stream`` sends the model output as MetonaStreamEvent lines."""
    max_iterations: int | None = Field(None, ge=1, le=200, description="default: config agent.maxIterations")
    allowed_tools: list[str] | None = Field(None, description="only these tools (default: every available tool)")
    token_budget: int | None = Field(
        None, ge=1, le=2**53, description="stop the run once the model calls used this many tokens"
    )
    session_id: str | None = Field(None, min_length=1, max_length=256, description="default: request.meta.sessionId")


class RunSummary(Phase2Model):
    """phase-2 §6.2 ``summary``."""

    model_calls: int = 0
    tool_calls: int = 0
    duration_ms: int = 0
    token_usage: int = 0
    errors: int = 0
    invalid_tool_calls: int = 0
    """Tool calls that named an unknown or disallowed tool or carried invalid arguments (benchmarks' rate)."""


class PendingPermission(Phase2Model):
    request_id: str
    tool_call_id: str
    tool_name: str
    permission: str
    risk_level: str
    created_at: str


class AgentRun(Phase2Model):
    run_id: str
    session_id: str
    status: RunStatus
    provider_id: str
    model: str
    max_iterations: int
    allowed_tools: list[str] | None
    token_budget: int | None
    iterations: int
    summary: RunSummary
    output: str | None
    """The final answer once completed."""
    error: ErrorInfo | None
    pending_permission: PendingPermission | None
    trace_available: bool
    created_at: str
    started_at: str | None
    updated_at: str
    completed_at: str | None


class RunIdParams(Params):
    run_id: str = Field(min_length=1, max_length=256)


class AgentRunListParams(PageParams):
    status: RunStatus | None = None
    session_id: str | None = Field(None, min_length=1, max_length=256)


AgentRunList = Page[AgentRun]


class RunEventsParams(CursorParams):
    run_id: str = Field(min_length=1, max_length=256)


class RunCancelResult(Phase2Model):
    accepted: bool = True
    status: RunStatus


class TraceSnapshot(Phase2Model):
    """phase-2 §6.2."""

    run_id: str
    status: RunStatus
    items: list[StoredEvent]
    next_sequence: int
    has_more: bool
    summary: RunSummary
    config_snapshot: dict[str, Any]


class PermissionResolveParams(Params):
    run_id: str = Field(min_length=1, max_length=256)
    request_id: str = Field(min_length=1, max_length=256)
    decision: PermissionDecision


class PermissionResolveResult(Phase2Model):
    run_id: str
    request_id: str
    decision: PermissionDecision
    resolved: bool = True


class ToolListResult(Phase2Model):
    items: list[MetonaToolDef]
    """Every registered tool, as the model sees it."""
    unavailable: dict[str, str]
    """Registered tools that cannot run now (name → reason); runs leave them out."""


class ArtifactParams(Params):
    run_id: str = Field(min_length=1, max_length=256)
    artifact_id: str = Field(min_length=1, max_length=256)


class Artifact(Phase2Model):
    """A tool result too large for a trace event (phase-2 §6.4), kept whole (sanitised) beside the trace."""

    artifact_id: str
    run_id: str
    tool_call_id: str
    size_bytes: int
    content: Any
    created_at: str
