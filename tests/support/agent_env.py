"""An in-process agent service on a fresh data directory (SQLite, event log, config, providers, the built-in tools),
for the agent tests and ``scripts/bench/bench_agent.py``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import anyio

from sidecar.agent.service import AgentService
from sidecar.agent.tools import default_registry
from sidecar.config.service import ConfigService
from sidecar.providers.service import ProviderService
from sidecar.storage.secrets import SecretStore
from sidecar.storage.sqlite import Database
from sidecar.trace.eventlog import EventLog


@dataclass
class AgentEnv:
    agent: AgentService
    providers: ProviderService
    config: ConfigService
    events: EventLog
    db: Database
    workspace: Path
    """A resolved folder configured as the only workspace root (so the file tools are available)."""


@contextlib.asynccontextmanager
async def agent_environment(data_dir: Path, workspace: Path) -> AsyncIterator[AgentEnv]:
    db = await Database.open(data_dir)
    events = EventLog(db)
    await events.migrate()
    secrets = await SecretStore.open(db, data_dir.parent / f"{data_dir.name}.master.key")
    config = ConfigService(db, secrets)
    await config.migrate()
    providers = ProviderService(db, secrets, config, retry_base_s=0.001)
    await providers.migrate()
    folder = anyio.Path(workspace)
    await folder.mkdir(parents=True, exist_ok=True)
    root = Path(await folder.resolve())
    await config.update({"agent.workspaceRoots": [str(root)]})
    try:
        async with anyio.create_task_group() as tg:
            agent = AgentService(events, providers, config, default_registry(), tg)
            await agent.start()
            try:
                yield AgentEnv(agent, providers, config, events, db, root)
            finally:
                await agent.shutdown(2)
                tg.cancel_scope.cancel()
    finally:
        await providers.close()
        await db.close()
