"""FallbackProvider on its own (no records, no keys): two mock adapters, one policy; what ProviderService composes."""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.ir import MetonaErrorCode
from sidecar.providers.adapters import build_adapter
from sidecar.providers.base import BaseAdapter, ProviderConfig
from sidecar.providers.errors import ProviderError
from sidecar.providers.fallback import PROVIDER_SWITCHED, FallbackProvider, RetryPolicy
from sidecar.providers.presets import PRESETS

from .test_service import Recorder, request

pytestmark = pytest.mark.anyio


def mock(provider_id: str, *turns: dict[str, Any]) -> BaseAdapter:
    return build_adapter(
        ProviderConfig(
            provider_id=provider_id,
            preset="mock",
            protocol="mock",
            base_url="mock://local",
            default_model=PRESETS["mock"].default_model,
            options={"script": {"turns": list(turns)}},
            models=PRESETS["mock"].models,
        )
    )


class Calls:
    def __init__(self, fallback: BaseAdapter | None) -> None:
        self.fallback = fallback
        self.resolved: list[str | None] = []
        self.checked: list[str] = []
        self.released: list[str] = []
        self.observed: list[tuple[str, dict[str, Any]]] = []

    async def resolve(self, primary_model: str | None) -> tuple[BaseAdapter, str | None] | None:
        self.resolved.append(primary_model)
        return None if self.fallback is None else (self.fallback, None)

    def check(self, adapter: BaseAdapter) -> None:
        self.checked.append(adapter.provider_id)

    async def release(self, adapter: BaseAdapter) -> None:
        self.released.append(adapter.provider_id)

    async def observe(self, kind: str, data: dict[str, Any]) -> None:
        self.observed.append((kind, data))

    def provider(self, primary: BaseAdapter, max_retries: int) -> FallbackProvider:
        policy = RetryPolicy(max_retries, base_s=0.001)
        return FallbackProvider(
            primary.provider_id, primary, self.resolve, policy=policy, check=self.check, release=self.release
        )


async def test_retries_then_fails_over_and_announces_the_switch() -> None:
    down = {"text": "never", "error": {"code": "model_overloaded", "retryable": True, "times": 99}}
    primary, backup = mock("a", down), mock("b", {"text": "from b"})
    calls, rec = Calls(backup), Recorder()
    response = await calls.provider(primary, 2).chat(
        None, request(), emit=rec.emit, notify=rec.notify, observe=calls.observe
    )
    assert response.content == "from b"
    assert calls.checked == ["a", "a", "a", "b"], "three attempts on the primary (1 + 2 retries), one on b"
    assert [k for k, _ in calls.observed] == ["retry", "retry", "failover"]
    assert [d["attempt"] for k, d in calls.observed if k == "retry"] == [1, 2]
    assert calls.released == ["b"]
    ((method, params),) = rec.notes
    assert method == PROVIDER_SWITCHED
    assert params["from_provider"] == "a" and params["to_provider"] == "b" and params["reason"] == "model_overloaded"
    assert rec.types[-2:] == ["usage", "done"]


async def test_a_request_fault_is_neither_retried_nor_failed_over() -> None:
    bad = {"text": "x", "error": {"code": "context_length_exceeded", "retryable": False, "times": 1}}
    calls, rec = Calls(mock("b", {"text": "from b"})), Recorder()
    with pytest.raises(ProviderError) as info:
        await calls.provider(mock("a", bad), 3).chat(None, request(), emit=rec.emit, notify=rec.notify)
    assert info.value.error.code is MetonaErrorCode.CONTEXT_LENGTH_EXCEEDED
    assert calls.checked == ["a"] and calls.resolved == [] and rec.notes == []
    assert rec.types == ["error", "done"]


def test_backoff_is_exponential_with_jitter_unless_the_server_says_when() -> None:
    policy = RetryPolicy(3, base_s=0.5)
    assert policy.backoff(0, 1500) == 1.5
    for attempt, base in ((0, 0.5), (1, 1.0), (2, 2.0)):
        assert base <= policy.backoff(attempt, None) <= base * 1.25
