"""The provider conformance suite (phase-2 §8.3): targets, YAML cases, the plan of (target, case) pairs, and the
run of one pair through a real loopback HTTP server replaying a recorded vendor answer.

A *target* is one adapter configuration (a preset spoken in one protocol); a *case* is a vendor-neutral
description (capabilities, request fixture, recorded scenario, assertions). Every target runs every case; a pair
is skipped, with its reason, when the target has no model with the case's capabilities, when the case's
scenario cannot be expressed in the target's protocol, or when the target has no recording of the scenario.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import anyio
import yaml

from sidecar.ir import MetonaRequest, MetonaResponse, MetonaStreamEvent
from sidecar.providers.adapters import build_adapter
from sidecar.providers.base import ProviderConfig
from sidecar.providers.capabilities import CHAT, STREAMING, THINKING, TOOL_CALLING, VISION, ModelSpec
from sidecar.providers.errors import ProviderError
from sidecar.providers.presets import PRESETS

from .loopback import LoopbackServer, ReceivedRequest, Recording

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CASES_DIR = HERE / "cases"
REQUESTS_DIR = HERE / "requests"
RECORDINGS_DIR = ROOT / "tests" / "providers" / "recordings"
API_KEY = "sk-test"
CASE_TIMEOUT_S = 10.0


# ---- targets -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    name: str
    """Also the recordings directory: ``tests/providers/recordings/<name>/``."""
    preset: str
    protocol: str
    endpoint: str
    """The path the vendor documents for chat (IR 🔗 Adapter 实现清单), relative to the server root."""
    declared_models: tuple[ModelSpec, ...] = ()
    """For presets that list no models: a model the vendor documents, with its documented capabilities."""

    @property
    def base_path(self) -> str:
        """The path part of the preset's base URL for this protocol (``/v1`` for OpenAI and Agnes-OpenAI)."""
        return urlparse(PRESETS[self.preset].base_urls[self.protocol]).path.rstrip("/")

    def models(self) -> tuple[tuple[ModelSpec, str], ...]:
        """(model, where its capabilities come from), the preset's default model first."""
        preset = PRESETS[self.preset]
        if preset.models:
            ordered = sorted(preset.models, key=lambda m: m.id != preset.default_model)
            return tuple((m, f"preset {self.preset}") for m in ordered)
        return tuple((m, "declared by the target (the preset lists no models)") for m in self.declared_models)


_ALL = (CHAT, STREAMING, TOOL_CALLING, THINKING)

TARGETS: tuple[Target, ...] = (
    Target("deepseek", "deepseek", "openai", "/chat/completions"),
    Target("agnes-openai", "agnes-ai", "openai", "/v1/chat/completions"),
    Target("openai", "openai", "openai", "/v1/chat/completions"),
    Target("anthropic", "anthropic", "anthropic", "/v1/messages"),
    Target("agnes-anthropic", "agnes-ai", "anthropic", "/v1/messages"),
    # On ollama.com/library qwen3 is tagged "tools" and "thinking", qwen2.5vl "vision" (no tools).
    Target(
        "ollama",
        "ollama",
        "ollama",
        "/api/chat",
        (ModelSpec("qwen3", capabilities=_ALL), ModelSpec("qwen2.5vl", capabilities=(CHAT, STREAMING, VISION))),
    ),
)
TARGETS_BY_NAME = {t.name: t for t in TARGETS}


# ---- cases ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    scenario: str
    stream: bool
    capabilities: tuple[str, ...]
    request_fixture: str
    assertions: dict[str, Any]
    protocols: tuple[str, ...] | None = None
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per target: assertions that differ for that vendor (documented in the case file)."""

    def assertions_for(self, target: str) -> dict[str, Any]:
        return {**self.assertions, **self.overrides.get(target, {})}

    def request(self) -> MetonaRequest:
        data = yaml.safe_load((REQUESTS_DIR / f"{self.request_fixture}.yaml").read_text(encoding="utf-8"))
        return MetonaRequest.model_validate(data)


def load_cases() -> tuple[Case, ...]:
    cases = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        cases.append(
            Case(
                id=data["id"],
                scenario=data["scenario"],
                stream=bool(data.get("stream", True)),
                capabilities=tuple(data["capabilities"]),
                request_fixture=data["request_fixture"],
                assertions=dict(data.get("assertions") or {}),
                protocols=tuple(data["protocols"]) if data.get("protocols") else None,
                overrides={k: dict(v) for k, v in (data.get("overrides") or {}).items()},
            )
        )
    ids = [c.id for c in cases]
    if len(ids) != len(set(ids)):
        raise ValueError(f"duplicate case ids in {CASES_DIR}")
    return tuple(cases)


CASES = load_cases()


# ---- the plan ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    target: Target
    case: Case
    model: str | None
    capability_source: str
    skip_reason: str | None

    @property
    def id(self) -> str:
        return f"{self.target.name}::{self.case.id}"

    @property
    def recording_path(self) -> Path:
        return RECORDINGS_DIR / self.target.name / f"{self.case.scenario}.yaml"

    def row(self) -> dict[str, Any]:
        return {
            "target": self.target.name,
            "preset": self.target.preset,
            "protocol": self.target.protocol,
            "model": self.model or "",
            "case": self.case.id,
            "capabilities_from": self.capability_source,
        }


def plan(target: Target, case: Case) -> Pair:
    if case.protocols is not None and target.protocol not in case.protocols:
        why = f"scenario {case.scenario} is not expressible in protocol {target.protocol}"
        return Pair(target, case, None, "", why)
    models = target.models()
    for spec, source in models:
        if all(spec.supports(c) for c in case.capabilities):
            return Pair(target, case, spec.id, source, None)
    missing = sorted({c for c in case.capabilities if not any(s.supports(c) for s, _ in models)})
    known = ", ".join(s.id for s, _ in models) or "none"
    why = f"capability {'/'.join(missing) or '+'.join(case.capabilities)}: no model of preset {target.preset} has it"
    return Pair(target, case, models[0][0].id if models else None, "", f"{why} (models: {known})")


PAIRS: tuple[Pair, ...] = tuple(plan(t, c) for t in TARGETS for c in CASES)


def recording_skip_reason(pair: Pair) -> str | None:
    if not pair.recording_path.exists():
        return f"no recording {pair.recording_path.relative_to(ROOT)}"
    return None


# ---- one run ------------------------------------------------------------------------------------------------


@dataclass
class Run:
    pair: Pair
    request: MetonaRequest
    recording: Recording
    events: list[MetonaStreamEvent]
    response: MetonaResponse
    error: ProviderError | None
    """The ProviderError ``run`` raised (captured on its way to the IR surface), if any."""
    received: list[ReceivedRequest]
    elapsed_ms: float


async def run_pair(server: LoopbackServer, pair: Pair, recording: Recording | None = None) -> Run:
    """Replay the pair's recording (or ``recording``) through ``server`` and drive the adapter's IR surface once."""
    target, case = pair.target, pair.case
    if recording is None:
        recording = Recording.load(pair.recording_path)
    request = case.request()
    server.answer(target.endpoint, recording)
    config = ProviderConfig(
        provider_id=target.name,
        preset=target.preset,
        protocol=target.protocol,
        base_url=server.url + target.base_path,
        api_key=API_KEY,
        default_model=pair.model,
        models=PRESETS[target.preset].models,
    )
    adapter = build_adapter(config)
    raised: list[ProviderError] = []
    inner_run = adapter.run

    async def spy_run(*args: Any, **kwargs: Any) -> None:
        try:
            await inner_run(*args, **kwargs)
        except ProviderError as exc:
            raised.append(exc)
            raise

    adapter.run = spy_run  # type: ignore[method-assign]  # the IR surface (_collect) calls self.run
    events: list[MetonaStreamEvent] = []

    async def on_event(event: MetonaStreamEvent) -> None:
        events.append(event)

    started = time.perf_counter()
    try:
        with anyio.fail_after(CASE_TIMEOUT_S):
            if case.stream:
                response = await adapter.send_stream(request, on_event)
            else:
                response = await adapter.send(request)
    finally:
        await adapter.aclose()
    elapsed_ms = (time.perf_counter() - started) * 1000
    return Run(
        pair, request, recording, events, response, raised[-1] if raised else None, list(server.requests), elapsed_ms
    )
