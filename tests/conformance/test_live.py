"""Opt-in real-network calls: one plain-text streamed call per target, skipped unless the vendor's key is set.

    METONA_LIVE_DEEPSEEK_API_KEY, METONA_LIVE_OPENAI_API_KEY, METONA_LIVE_ANTHROPIC_API_KEY,
    METONA_LIVE_AGNES_API_KEY (both Agnes protocols),
    METONA_LIVE_OLLAMA_API_KEY or METONA_LIVE_OLLAMA_BASE_URL (a local Ollama needs no key; model qwen3 unless
    METONA_LIVE_OLLAMA_MODEL says otherwise).

``METONA_LIVE_<VENDOR>_BASE_URL`` / ``_MODEL`` override the preset's base URL / model. The stream must obey the IR
rules (:func:`checks.stream_invariants`) and carry some text; CI sets none of these variables.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import anyio
import pytest

from sidecar.ir import MetonaFinishReason, MetonaStreamEvent
from sidecar.providers.adapters import build_adapter
from sidecar.providers.base import ProviderConfig
from sidecar.providers.presets import PRESETS

from .checks import Problems, stream_invariants
from .suite import TARGETS_BY_NAME, Case

pytestmark = [pytest.mark.anyio, pytest.mark.live]

LIVE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LiveTarget:
    target: str
    vendor: str
    """The ``<VENDOR>`` of the environment variables."""
    default_model: str | None
    key_optional: bool = False

    def env(self, name: str) -> str | None:
        return os.environ.get(f"METONA_LIVE_{self.vendor}_{name}") or None

    @property
    def model(self) -> str | None:
        return self.env("MODEL") or self.default_model

    def skip_reason(self) -> str | None:
        if self.env("API_KEY") is None and not (self.key_optional and self.env("BASE_URL")):
            extra = f" or METONA_LIVE_{self.vendor}_BASE_URL" if self.key_optional else ""
            return f"live test: METONA_LIVE_{self.vendor}_API_KEY{extra} is not set"
        if self.model is None:
            return f"live test: METONA_LIVE_{self.vendor}_MODEL is not set (the preset has no default model)"
        return None


LIVE_TARGETS = (
    LiveTarget("deepseek", "DEEPSEEK", "deepseek-chat"),
    LiveTarget("agnes-openai", "AGNES", "agnes-2.0-flash"),
    LiveTarget("openai", "OPENAI", "gpt-4o-mini"),
    LiveTarget("anthropic", "ANTHROPIC", "claude-haiku-4-5"),
    LiveTarget("agnes-anthropic", "AGNES", "agnes-2.0-flash"),
    LiveTarget("ollama", "OLLAMA", "qwen3", key_optional=True),
)


@pytest.mark.parametrize("live_target", LIVE_TARGETS, ids=[t.target for t in LIVE_TARGETS])
async def test_live_plain_text(live_target: LiveTarget) -> None:
    reason = live_target.skip_reason()
    if reason:
        pytest.skip(reason)
    target = TARGETS_BY_NAME[live_target.target]
    preset = PRESETS[target.preset]
    config = ProviderConfig(
        provider_id=target.name,
        preset=target.preset,
        protocol=target.protocol,
        base_url=live_target.env("BASE_URL") or preset.base_urls[target.protocol],
        api_key=live_target.env("API_KEY"),
        default_model=live_target.model,
        models=preset.models,
    )
    request = Case("live", "live", True, (), "plain_chat", {}).request()
    adapter = build_adapter(config)
    events: list[MetonaStreamEvent] = []
    try:
        with anyio.fail_after(LIVE_TIMEOUT_S):
            response = await adapter.send_stream(request, events.append)
    finally:
        await adapter.aclose()
    problems = Problems()
    stream_invariants(events, response, request, problems)
    problems.expect(response.error is None, f"live: error {response.error!r}")
    problems.expect(response.content.strip(), "live: no text")
    problems.expect(response.finish_reason is MetonaFinishReason.STOP, f"live: finishReason {response.finish_reason}")
    assert not problems, "\n".join(problems)
