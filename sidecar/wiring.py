"""The domain layer: storage, event log, jobs, every domain's methods. Loaded after ``initialize``.

Importing this module brings in pydantic's model machinery and every domain's models, which is why
``sidecar.app`` loads it in a worker thread once ``initialize`` has answered (heavy third-party
libraries stay lazy inside the domains themselves).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from anyio.abc import TaskGroup

from .agent import rpc as agent_rpc
from .agent.service import AgentService
from .agent.tools import ToolServices, default_registry
from .benchmarks import rpc as benchmarks_rpc
from .benchmarks.agent_run import AgentDeps
from .benchmarks.service import BenchmarkService
from .config import rpc as config_rpc
from .config.service import ConfigService
from .core.settings import Settings, default_secret_key_file
from .embeddings import default_embedder
from .export import rpc as export_rpc
from .export.service import ExportService
from .ipc.router import Method, Notification
from .jobs import JobManager
from .knowledge import rpc as knowledge_rpc
from .knowledge.service import KnowledgeService
from .mcp_host.service import McpBridge
from .media import rpc as media_rpc
from .media.client import WorkerClient
from .media.service import MediaService
from .memory import rpc as memory_rpc
from .memory.service import MemoryService
from .plugins import rpc as plugins_rpc
from .plugins.service import PluginService
from .providers import rpc as providers_rpc
from .providers.service import ProviderService
from .render import rpc as render_rpc
from .render.service import RenderService
from .retrieval import rpc as retrieval_rpc
from .retrieval.service import RetrievalService
from .storage.secrets import SecretStore
from .storage.sqlite import Database
from .themes import rpc as themes_rpc
from .themes.service import ThemeService
from .trace import rpc as trace_rpc
from .trace.eventlog import EventLog
from .trace.subscriptions import SubscriptionManager
from .workers.supervisor import ChildSupervisor

logger = logging.getLogger("sidecar")

SendNotification = Callable[[str, Any], Awaitable[None]]


@dataclass
class Services:
    db: Database
    events: EventLog
    subscriptions: SubscriptionManager
    jobs: JobManager
    children: ChildSupervisor
    config: ConfigService
    providers: ProviderService
    memory: MemoryService
    knowledge: KnowledgeService
    retrieval: RetrievalService
    agent: AgentService
    benchmarks: BenchmarkService
    render: RenderService
    themes: ThemeService
    plugins: PluginService
    bridge: McpBridge
    media: MediaService
    exports: ExportService


async def open_services(
    settings: Settings,
    stack: AsyncExitStack,
    tg: TaskGroup,
    send_notification: SendNotification,
    children: ChildSupervisor,
) -> Services:
    """Open storage and build the domain services (closed by ``stack`` in reverse order)."""
    db = await Database.open(settings.data_dir)
    stack.push_async_callback(db.close)
    events = EventLog(db)
    await events.migrate()
    stack.callback(events.close)
    subscriptions = SubscriptionManager(events, send_notification, tg)
    jobs = JobManager(db, events, tg)
    interrupted = await jobs.recover()
    if interrupted:
        logger.warning("marked %d job(s) interrupted by the last exit as failed", len(interrupted))
    secrets = await SecretStore.open(db, settings.secret_key_file or default_secret_key_file())
    config = ConfigService(db, secrets)
    await config.migrate()
    providers = ProviderService(db, secrets, config)
    await providers.migrate()
    stack.push_async_callback(providers.close)
    memory = MemoryService(settings.data_dir, default_embedder)  # LanceDB and the model load on first use
    knowledge = KnowledgeService(db, settings.data_dir)
    await knowledge.migrate()
    retrieval = RetrievalService(db, settings.data_dir, jobs=jobs, task_group=tg)  # LanceDB, model: on first use
    await retrieval.start()
    knowledge.add_listener(retrieval.changed)  # notes/* answer once their changed blocks are indexed
    tg.start_soon(retrieval.catch_up)  # what a crash left unindexed
    registry = default_registry()
    agent = AgentService(
        events,
        providers,
        config,
        registry,
        tg,
        memories=memory.relevant_memories,
        services=ToolServices(memory=memory, retrieval=retrieval),
    )
    await agent.start()
    # benchmarks: runs are jobs; each case runs through the real retrieval / agent runtime in an isolated store
    benchmarks = BenchmarkService(
        db,
        settings.data_dir,
        jobs,
        embedder_config=lambda: retrieval.embedder_config,
        agent=AgentDeps(events=events, db=db, secrets=secrets, config=config, registry=agent.registry, task_group=tg),
    )
    await benchmarks.start()
    render = _open_render(settings, children)  # Chromium starts on the first Mermaid render, not here
    themes = ThemeService(settings.data_dir, settings.app_version)
    await themes.start()
    # plugins: one MCP host per installed plugin, its tools in the agent's registry as <plugin_id>.<tool>
    bridge = McpBridge(registry, children, tg, grace_s=settings.shutdown_grace_s)
    plugins = PluginService(
        db,
        events,
        secrets,
        bridge,
        settings.data_dir,
        development=settings.development,
        app_version=settings.app_version,
    )
    await plugins.migrate()
    await plugins.start()
    # media: transcription jobs; the models run in a worker child process started on the first job
    media = MediaService(
        db,
        jobs,
        knowledge,
        WorkerClient(children, tg),
        models_dir=settings.models_dir,
        tmp_dir=settings.data_dir / "tmp" / "media",
        whisper_model_dir=settings.whisper_model_dir,
        diarization_model_dir=settings.diarization_model_dir,
    )
    await media.migrate()
    # export: jobs (kind "export") over the AST → html/pdf/docx; PDF and DOCX rasters use the render browser
    exports = ExportService(settings.data_dir, jobs, render=render, knowledge=knowledge, themes=themes)
    await exports.start(tg)
    # the embedded local model (issue 15): its worker starts on first use, stops when idle and on shutdown
    from .localmodel.client import LocalRuntime
    from .providers import local as local_provider

    async def local_progress(data: dict[str, Any]) -> None:
        await send_notification("local/modelProgress", data)

    local_runtime = LocalRuntime(children, settings.models_dir, progress=local_progress, task_group=tg)
    local_provider.set_runtime(local_runtime)
    stack.push_async_callback(local_runtime.aclose)
    return Services(
        db=db,
        events=events,
        subscriptions=subscriptions,
        jobs=jobs,
        children=children,
        config=config,
        providers=providers,
        memory=memory,
        knowledge=knowledge,
        retrieval=retrieval,
        agent=agent,
        benchmarks=benchmarks,
        render=render,
        themes=themes,
        plugins=plugins,
        bridge=bridge,
        media=media,
        exports=exports,
    )


def _open_render(settings: Settings, children: ChildSupervisor) -> RenderService:
    """Static rendering: one warm browser per sidecar (shared with exporters), Mermaid, plots, maths."""
    from .render.browser import BrowserPool
    from .render.mermaid import MermaidRenderer
    from .render.renderers import FunctionPlotRenderer, MathRenderer
    from .system.capabilities import find_chromium

    browser = BrowserPool(find_chromium(settings), children=children)
    from .render.mathworker import MathWorker

    renderers = [MermaidRenderer(browser), FunctionPlotRenderer(), MathRenderer(MathWorker(children))]
    return RenderService(settings.data_dir, browser, renderers)


def domain_methods(services: Services, settings: Settings) -> tuple[list[Method[Any, Any]], list[Notification]]:
    """Every domain's methods and notifications (the production table, plus dev ones if enabled)."""
    methods: list[Method[Any, Any]] = [*trace_rpc.methods(services.subscriptions)]
    methods += memory_rpc.methods(services.memory)
    methods += knowledge_rpc.methods(services.knowledge)
    methods += retrieval_rpc.methods(services.retrieval, services.jobs)
    methods += config_rpc.methods(services.config)
    methods += providers_rpc.methods(services.providers)
    methods += agent_rpc.methods(services.agent)
    methods += benchmarks_rpc.methods(services.benchmarks)
    methods += render_rpc.methods(services.render)
    methods += themes_rpc.methods(services.themes)
    methods += plugins_rpc.methods(services.plugins)
    methods += media_rpc.methods(services.media)
    methods += export_rpc.methods(services.exports)
    notifications = [*trace_rpc.notifications(), *providers_rpc.notifications(), *providers_rpc.local_notifications()]
    if settings.dev_methods:
        from .system.devtools import dev_job_methods, dev_methods

        methods += dev_methods(services.children)
        methods += dev_job_methods(services.jobs)
    return methods, notifications


def shutdown_hooks(services: Services, settings: Settings) -> list[Callable[[], Awaitable[None]]]:
    """Teardown in order: cancel agent runs (their RunCancelled still reaches subscribers), stop pushing events,
    cancel jobs (child processes are stopped by the app's own hook, which runs after these)."""
    grace = settings.shutdown_grace_s
    return [
        lambda: services.agent.shutdown(grace),
        services.bridge.shutdown,  # every plugin's server and its descendants (process groups)
        services.subscriptions.close_all,
        lambda: services.jobs.shutdown(grace),
        services.render.close,  # the warm browser: closed gracefully, its process group killed if it lingers
    ]
