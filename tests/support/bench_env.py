"""An in-process sidecar for the benchmark tests and ``scripts/bench/bench_benchmarks.py``: storage, jobs, config,
providers, the user's knowledge/retrieval/memory and workspace, the agent service, and the benchmark service —
wired as ``sidecar.wiring`` does (the user's side exists so that isolation can be checked)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio

from sidecar.agent.service import AgentService
from sidecar.agent.tools import ToolServices, default_registry
from sidecar.benchmarks.agent_run import AgentDeps
from sidecar.benchmarks.service import BenchmarkService
from sidecar.config.service import ConfigService
from sidecar.embeddings import default_embedder
from sidecar.jobs.manager import JobManager
from sidecar.knowledge.service import KnowledgeService
from sidecar.memory.service import MemoryService
from sidecar.providers.service import ProviderService
from sidecar.retrieval.service import RetrievalService
from sidecar.storage.secrets import SecretStore
from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog


@dataclass
class BenchEnv:
    data_dir: Path
    workspace: Path
    db: Database
    events: EventLog
    jobs: JobManager
    knowledge: KnowledgeService
    retrieval: RetrievalService
    memory: MemoryService
    agent: AgentService
    bench: BenchmarkService


@contextlib.asynccontextmanager
async def bench_environment(
    data_dir: Path, workspace: Path, builtin_dir: Path | None = None
) -> AsyncIterator[BenchEnv]:
    db = await Database.open(data_dir)
    events = EventLog(db)
    await events.migrate()
    secrets = await SecretStore.open(db, data_dir.parent / f"{data_dir.name}.master.key")
    config = ConfigService(db, secrets)
    await config.migrate()
    providers = ProviderService(db, secrets, config, retry_base_s=0.001)
    await providers.migrate()
    await anyio.Path(workspace).mkdir(parents=True, exist_ok=True)
    await config.update({"agent.workspaceRoots": [str(await anyio.Path(workspace).resolve())]})
    try:
        async with anyio.create_task_group() as tg:
            jobs = JobManager(db, events, tg)
            await jobs.migrate()
            knowledge = KnowledgeService(db, data_dir)
            await knowledge.migrate()
            retrieval = RetrievalService(db, data_dir, jobs=jobs, task_group=tg)
            await retrieval.start()
            knowledge.add_listener(retrieval.changed)
            memory = MemoryService(data_dir, default_embedder)
            agent = AgentService(
                events,
                providers,
                config,
                default_registry(),
                tg,
                memories=memory.relevant_memories,
                services=ToolServices(memory=memory, retrieval=retrieval),
            )
            await agent.start()
            bench = BenchmarkService(
                db,
                data_dir,
                jobs,
                embedder_config=lambda: retrieval.embedder_config,
                agent=AgentDeps(events, db, secrets, config, agent.registry, tg),
                builtin_dir=builtin_dir,
            )
            await bench.start()
            try:
                yield BenchEnv(data_dir, workspace, db, events, jobs, knowledge, retrieval, memory, agent, bench)
            finally:
                await agent.shutdown(2)
                await jobs.shutdown(2)
                tg.cancel_scope.cancel()
    finally:
        await providers.close()
        await db.close()
