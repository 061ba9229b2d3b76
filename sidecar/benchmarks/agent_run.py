"""The agent benchmark runner: each case is a real agent run (``AgentService.create``: the loop, permissions, step
and token limits, the tool registry) in an isolated environment, scored from its trace.

Isolation: the run's tools see a workspace folder of the case's own (fixtures written first), a vault (knowledge
store + retrieval index holding the dataset's corpus) and an empty memory store of the benchmark run — all under
the run's work dir, removed afterwards. The traces go to the sidecar's event log and run table (session id = the
benchmark run id), so every ``trace_run_id`` in a report stays readable with ``agent/runs/get``/``trace``.
Permission requests are answered by the benchmark (recorded in the trace as source ``benchmark``): ``allow_once``
for a tool the case's ``allowed_tools`` names (the user's consent, given by importing the dataset), ``deny`` for
any other tool and always for a high- or critical-risk plugin tool (an imported dataset must not make a plugin
delete or send something with nobody asked, issue 21). The scripted ``mock`` provider plays the case's
``mock_script``; any other provider is the user's configured one. Fail-over is off, so a number is the named
provider's.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from sidecar.agent.models import AgentRunCreateParams, PermissionDecision
from sidecar.agent.permissions import PermissionBroker, PermissionRequest
from sidecar.agent.service import AgentService
from sidecar.core.common import ErrorInfo
from sidecar.core.errors import SidecarError
from sidecar.providers.base import ProviderConfig
from sidecar.providers.presets import PRESETS
from sidecar.providers.service import ProviderService

from .models import AgentCase, CaseResult

logger = logging.getLogger(__name__)

MOCK_PROVIDER = "mock"
TERMINAL = ("completed", "failed", "cancelled")


UNPROMPTED_PLUGIN_RISKS = frozenset({"high", "critical"})
"""Plugin tools of these risks are never run by a benchmark: they need a person's answer."""


class BenchmarkBroker(PermissionBroker):
    """Answers every permission request at once (source ``benchmark``): ``allow_once`` for a tool in ``allowed``
    unless it is a high- or critical-risk plugin tool, ``deny`` otherwise."""

    def __init__(self, allowed: list[str] | None) -> None:
        super().__init__()
        self._allowed = frozenset(allowed or ())

    def decide(self, tool_name: str, permission: str, risk_level: str) -> PermissionDecision:
        if tool_name not in self._allowed:
            return "deny"
        if permission.startswith("plugin.") and risk_level.lower() in UNPROMPTED_PLUGIN_RISKS:
            return "deny"
        return "allow_once"

    def open(
        self,
        run_id: str,
        session_id: str,
        *,
        tool_call_id: str,
        tool_name: str,
        permission: str,
        risk_level: str,
        tool: Any = None,
    ) -> PermissionRequest:
        request = super().open(
            run_id, session_id, tool_call_id=tool_call_id, tool_name=tool_name, permission=permission,
            risk_level=risk_level, tool=tool,
        )  # fmt: skip
        request.answer(self.decide(tool_name, permission, risk_level), "benchmark")
        return request


class ConfigOverlay:
    """The sidecar's config with a few keys replaced for one case (its workspace, fail-over off)."""

    def __init__(self, base: Any, overrides: dict[str, Any]) -> None:
        self._base = base
        self._overrides = overrides

    async def get(self, key: str) -> Any:
        if key in self._overrides:
            return self._overrides[key]
        return await self._base.get(key)

    async def secret(self, key: str) -> Any:
        return await self._base.secret(key)


class CaseProviders(ProviderService):
    """The configured providers, except that ``mock`` plays this case's script (no row is written anywhere)."""

    def __init__(
        self, db: Any, secrets: Any, config: Any, script: dict[str, Any] | None, *, local_runtime: Any = None
    ) -> None:
        super().__init__(db, secrets, config, local_runtime=local_runtime)
        self._script = script
        self._mock: Any = None

    async def adapter(self, provider_id: str) -> Any:
        if provider_id != MOCK_PROVIDER:
            return await super().adapter(provider_id)
        if self._mock is None:
            from sidecar.providers.adapters import build_adapter

            preset = PRESETS["mock"]
            options = {"script": self._script} if self._script is not None else {}
            self._mock = build_adapter(
                ProviderConfig(
                    provider_id=MOCK_PROVIDER,
                    preset="mock",
                    protocol="mock",
                    base_url="mock://local",
                    default_model=preset.default_model,
                    options=options,
                    models=preset.models,
                )
            )
        return self._mock

    async def close(self) -> None:
        if self._mock is not None:
            await self._mock.aclose()
        await super().close()


@dataclass
class AgentDeps:
    """What the runner needs from the sidecar (built in the composition root)."""

    events: Any
    db: Any
    secrets: Any
    config: Any
    registry: Any
    task_group: Any
    local_runtime: Any = None
    """The sidecar's embedded-model runtime: a case run on the ``local`` provider uses it."""


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def write_fixtures(case: AgentCase, workspace: Path) -> tuple[Path, dict[str, str | None]]:
    """Create the case's workspace with its fixture files; its resolved path and each fixture's sha256."""
    workspace.mkdir(parents=True, exist_ok=True)
    workspace = workspace.resolve()
    digests: dict[str, str | None] = {}
    for f in case.fixtures.files if case.fixtures else []:
        target = (workspace / f.path).resolve()
        if not target.is_relative_to(workspace):
            raise ValueError(f"fixture path escapes the workspace: {f.path}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f.content, encoding="utf-8")
        digests[f.path] = _digest(target)
    return workspace, digests


async def _trace(events: Any, run_id: str) -> list[Any]:
    items: list[Any] = []
    after = 0
    while True:
        page = await events.read(run_id, after, 1000)
        items += page.items
        if not page.has_more:
            return items
        after = page.next_sequence


async def _until_done(agent: AgentService, events: Any, run_id: str, start: Any, limit_s: float) -> Any:
    with events.listen(run_id, buffer=100_000) as listener:
        start()
        with anyio.move_on_after(limit_s):
            run = await agent.get(run_id)
            while run.status not in TERMINAL:
                try:
                    event = await listener.receive()
                except anyio.EndOfStream:
                    await anyio.sleep(0.01)  # dropped (cannot happen with this buffer) or ended: re-read the row
                else:
                    if not event.terminal:
                        continue
                run = await agent.get(run_id)
            return run
    await agent.cancel(run_id)
    return await agent.get(run_id)


def _subset(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _subset(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, str) and isinstance(actual, str):
        return expected.strip().lower() == actual.strip().lower()
    return bool(expected == actual)


def _conditions(case: AgentCase, run: Any, trace: list[Any], workspace: Path, fixtures: dict[str, Any]) -> list[str]:
    """The unmet ``expected_conditions`` (empty: all met)."""
    cond = case.expected_conditions
    failed: list[str] = []
    citations = [e.data for e in trace if e.event == "Citation"]
    calls = [e for e in trace if e.event == "ToolCall"]
    output = (run.output or "").lower()
    want_status = cond.get("status", "completed")
    if run.status != want_status:
        failed.append(f"the run ended {run.status}, expected {want_status}")
    if cond.get("citation_required") and not citations:
        failed.append("no citation in the answer's trace")
    cited = {c.get("note_id") for c in citations}
    missing = [n for n in cond.get("cited_note_ids", []) if n not in cited]
    if missing:
        failed.append(f"notes not cited: {', '.join(missing)}")
    for text in cond.get("output_contains", []):
        if str(text).lower() not in output:
            failed.append(f"the answer does not contain {text!r}")
    if cond.get("no_tool_calls") and calls:
        failed.append(f"{len(calls)} tool call(s) where none was expected")
    for spec in cond.get("files_written", []):
        path = workspace / str(spec["path"])
        if not path.is_file():
            failed.append(f"file {spec['path']} was not written")
        elif "contains" in spec and str(spec["contains"]) not in path.read_text(encoding="utf-8", errors="replace"):
            failed.append(f"file {spec['path']} does not contain {spec['contains']!r}")
    for rel in cond.get("files_unchanged", []):
        if _digest(workspace / rel) != fixtures.get(rel):
            failed.append(f"fixture {rel} was changed")
    if "max_steps" in cond and run.iterations > int(cond["max_steps"]):
        failed.append(f"{run.iterations} steps, at most {cond['max_steps']} expected")
    return failed


def score_agent_case(
    case: AgentCase, rep: int, run: Any, trace: list[Any], workspace: Path, fixtures: dict[str, Any]
) -> CaseResult:
    calls = [e.data for e in trace if e.event == "ToolCall"]
    results = {e.data.get("tool_call_id"): e.data for e in trace if e.event == "ToolResult"}
    called = [c.get("tool_name") for c in calls]
    selection = 1.0 if set(called) == set(case.expected_tools) else 0.0
    checked = correct = 0
    for c in calls:
        name = c.get("tool_name")
        if name not in case.expected_tools:
            continue
        checked += 1
        valid = not results.get(c.get("tool_call_id"), {}).get("invalid_arguments", False)
        wanted = case.expected_arguments.get(name)
        correct += int(valid and (wanted is None or _subset(wanted, c.get("args", {}))))
    unmet = _conditions(case, run, trace, workspace, fixtures)
    reasons = list(unmet)
    if selection == 0.0:
        reasons.append(f"tools called {sorted(set(called))}, expected {sorted(set(case.expected_tools))}")
    return CaseResult(
        case_id=case.case_id,
        repeat=rep,
        status="failed" if unmet else "passed",
        failure_reason="; ".join(reasons) or None,
        error=run.error,
        tags=case.tags,
        latency_ms=float(run.summary.duration_ms),
        scores={"task_success_rate": 0.0 if unmet else 1.0, "tool_selection_accuracy": selection},
        details={
            "tools_called": called,
            "tool_calls": run.summary.tool_calls,
            "invalid_tool_calls": run.summary.invalid_tool_calls,
            "arguments_checked": checked,
            "arguments_correct": correct,
            "steps": run.iterations,
            "token_usage": run.summary.token_usage,
            "run_status": run.status,
            "citations": sum(e.event == "Citation" for e in trace),
            "unmet_conditions": unmet,
        },
        trace_run_id=run.run_id,
    )


def error_result(case: AgentCase, rep: int, exc: SidecarError, latency_ms: float) -> CaseResult:
    return CaseResult(
        case_id=case.case_id,
        repeat=rep,
        status="error",
        failure_reason=f"the agent run could not be made: {exc.message}",
        error=ErrorInfo(code=exc.code, message=exc.message, details=exc.details),
        tags=case.tags,
        latency_ms=latency_ms,
        scores={"task_success_rate": 0.0, "tool_selection_accuracy": 0.0},
        details={"tool_calls": 0, "invalid_tool_calls": 0, "steps": 0, "token_usage": 0},
    )


def _request(prompt: str, session_id: str) -> dict[str, Any]:
    return {
        "meta": {
            "sessionId": session_id,
            "iteration": 1,
            "requestId": session_id,
            "timestamp": 0,
            "agentVersion": "metona-bench",
        },
        "systemPrompt": {
            "roleDefinition": "You are Metona's assistant. Use the tools when they help; answer directly otherwise.",
            "outputConstraints": "",
            "safetyGuidelines": "",
        },
        "messages": [{"role": "user", "content": prompt, "timestamp": 0}],
        "params": {"stream": False},
    }


async def run_case(
    deps: AgentDeps,
    case: AgentCase,
    rep: int,
    *,
    bench_run_id: str,
    workspace: Path,
    services: Any,
    memories: Any,
    provider_id: str,
    model: str | None,
    max_steps: int,
    token_budget: int | None,
    case_timeout_s: float,
) -> tuple[CaseResult, float]:
    """One case as one agent run; returns its result and the benchmark's own overhead (ms)."""
    t0 = time.perf_counter()
    workspace, fixtures = await anyio.to_thread.run_sync(write_fixtures, case, workspace)
    config = ConfigOverlay(
        deps.config,
        {"agent.workspaceRoots": [str(workspace)], "llm.fallbackProvider": None, "llm.fallbackModel": None},
    )
    script = case.mock_script if provider_id == MOCK_PROVIDER else None
    providers = CaseProviders(deps.db, deps.secrets, config, script, local_runtime=deps.local_runtime)
    agent = AgentService(
        deps.events, providers, config, deps.registry, deps.task_group, memories=memories, services=services
    )
    agent.broker = BenchmarkBroker(case.allowed_tools)
    try:
        params = AgentRunCreateParams.model_validate(
            {
                "provider_id": provider_id,
                "model": model,
                "request": _request(case.prompt, bench_run_id),
                "max_iterations": max_steps,
                "allowed_tools": case.allowed_tools,
                "token_budget": token_budget,
                "session_id": bench_run_id,
            }
        )
        try:
            created, start = await agent.create(params)
        except SidecarError as exc:
            return error_result(case, rep, exc, (time.perf_counter() - t0) * 1000), 0.0
        run = await _until_done(agent, deps.events, created.run_id, start, case_timeout_s)
        trace = await _trace(deps.events, created.run_id)
        result = await anyio.to_thread.run_sync(score_agent_case, case, rep, run, trace, workspace, fixtures)
    finally:
        with anyio.CancelScope(shield=True):
            await agent.shutdown(2)
            await providers.close()
    overhead = max(0.0, (time.perf_counter() - t0) * 1000 - float(run.summary.duration_ms))
    return result, overhead
