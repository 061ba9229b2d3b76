"""IMetonaProviderAdapter is a structural Protocol; a minimal adapter satisfies it."""

from __future__ import annotations

import asyncio

from sidecar.ir import (
    IMetonaProviderAdapter,
    MetonaFinishReason,
    MetonaModelInfo,
    MetonaRequest,
    MetonaResponse,
    MetonaResponseMeta,
    MetonaStreamEvent,
    MetonaTokenUsage,
    StreamEventCallback,
)

REQUEST = MetonaRequest.model_validate(
    {
        "meta": {"sessionId": "s", "iteration": 1, "requestId": "r", "timestamp": 1, "agentVersion": "1.0.0"},
        "systemPrompt": {"roleDefinition": "a", "outputConstraints": "b", "safetyGuidelines": "c"},
        "messages": [{"role": "user", "content": "hi", "timestamp": 1}],
        "params": {"stream": True},
    }
)


class EchoAdapter:
    provider_id = "echo"
    supported_models = ["echo-1"]  # noqa: RUF012

    def get_context_window(self, model: str) -> int:
        return 4096

    async def health_check(self) -> bool:
        return True

    async def send(self, request: MetonaRequest) -> MetonaResponse:
        return MetonaResponse(
            meta=MetonaResponseMeta(
                request_id=request.meta.request_id, provider="echo", model="echo-1", latency_ms=0, timestamp=2
            ),
            content=request.messages[-1].content,
            usage=MetonaTokenUsage(input_tokens=1, output_tokens=1, total_tokens=2),
            finish_reason=MetonaFinishReason.STOP,
        )

    async def send_stream(self, request: MetonaRequest, on_event: StreamEventCallback) -> MetonaResponse:
        m = request.meta
        for event in (
            MetonaStreamEvent.text_delta(m.request_id, m.session_id, m.iteration, 0, 2, request.messages[-1].content),
            MetonaStreamEvent.done(m.request_id, m.session_id, m.iteration, 1, 3),
        ):
            maybe = on_event(event)
            if maybe is not None:
                await maybe
        return await self.send(request)

    async def list_models(self) -> list[MetonaModelInfo]:
        return []


def test_a_structural_adapter_is_an_imetonaprovideradapter() -> None:
    adapter: IMetonaProviderAdapter = EchoAdapter()
    assert isinstance(adapter, IMetonaProviderAdapter)
    assert not isinstance(object(), IMetonaProviderAdapter)


def test_send_stream_accepts_sync_and_async_callbacks() -> None:
    adapter = EchoAdapter()
    seen: list[bytes] = []

    async def on_event_async(event: MetonaStreamEvent) -> None:
        seen.append(event.to_line())

    async def main() -> MetonaResponse:
        await adapter.send_stream(REQUEST, lambda e: seen.append(e.to_line()))
        return await adapter.send_stream(REQUEST, on_event_async)

    resp = asyncio.run(main())
    assert resp.content == "hi"
    assert [MetonaStreamEvent.from_line(line).type for line in seen] == ["text_delta", "done"] * 2
