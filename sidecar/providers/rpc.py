"""``providers/*`` and ``chat/*`` (ARCHITECTURE.md §6), and the ``agent/providerSwitched`` notification."""

from __future__ import annotations

from typing import Any

from ..core.common import EmptyParams
from ..ipc.context import RequestContext
from ..ipc.router import Method, Notification
from ..ir import MetonaResponse
from .errors import ProviderError, to_sidecar_error
from .fallback import PROVIDER_SWITCHED
from .models import (
    ChatParams,
    LocalModelProgress,
    ModelList,
    PresetList,
    Provider,
    ProviderCreateParams,
    ProviderDeleted,
    ProviderHealthList,
    ProviderHealthParams,
    ProviderIdParams,
    ProviderList,
    ProviderSwitchedParams,
    ProviderTestParams,
    ProviderTestResult,
    ProviderUpdateParams,
)
from .service import ProviderService
from .stream import LineEmit


def methods(providers: ProviderService) -> list[Method[Any, Any]]:
    async def presets(ctx: RequestContext, p: EmptyParams) -> PresetList:
        return PresetList(items=providers.presets())

    async def list_(ctx: RequestContext, p: EmptyParams) -> ProviderList:
        return ProviderList(items=await providers.list())

    async def create(ctx: RequestContext, p: ProviderCreateParams) -> Provider:
        return await providers.create(**p.model_dump())

    async def get(ctx: RequestContext, p: ProviderIdParams) -> Provider:
        return await providers.get(p.provider_id)

    async def update(ctx: RequestContext, p: ProviderUpdateParams) -> Provider:
        fields = p.model_dump(exclude={"provider_id"}, exclude_unset=True)
        return await providers.update(p.provider_id, **fields)

    async def delete(ctx: RequestContext, p: ProviderIdParams) -> ProviderDeleted:
        await providers.delete(p.provider_id)
        return ProviderDeleted(provider_id=p.provider_id, deleted=True)

    async def models(ctx: RequestContext, p: ProviderIdParams) -> ModelList:
        try:
            return ModelList(items=await providers.models(p.provider_id))
        except ProviderError as exc:
            raise to_sidecar_error(exc) from None

    async def test(ctx: RequestContext, p: ProviderTestParams) -> ProviderTestResult:
        return await providers.test(**p.model_dump())

    async def health(ctx: RequestContext, p: ProviderHealthParams) -> ProviderHealthList:
        return ProviderHealthList(items=await providers.health(p.provider_id))

    async def send(ctx: RequestContext, p: ChatParams) -> MetonaResponse:
        try:
            return await providers.chat(p.provider_id, p.model, p.request, notify=ctx.notify)
        except ProviderError as exc:
            raise to_sidecar_error(exc) from None

    async def stream(ctx: RequestContext, p: ChatParams) -> MetonaResponse:
        emit = LineEmit(ctx.outbox.send_line)  # the hot path of a stream: one call layer less per line
        try:
            return await providers.chat(p.provider_id, p.model, p.request, emit=emit, notify=ctx.notify)
        except ProviderError as exc:
            raise to_sidecar_error(exc) from None

    return [
        Method(
            "providers/presets",
            EmptyParams,
            PresetList,
            presets,
            summary="Provider presets: base URL, protocol, known models.",
        ),
        Method(
            "providers/list",
            EmptyParams,
            ProviderList,
            list_,
            summary="Configured providers (API keys never returned).",
        ),
        Method(
            "providers/create",
            ProviderCreateParams,
            Provider,
            create,
            summary="Configure a provider from a preset; the API key is stored encrypted.",
        ),
        Method("providers/get", ProviderIdParams, Provider, get, summary="One configured provider."),
        Method(
            "providers/update",
            ProviderUpdateParams,
            Provider,
            update,
            summary='Change a provider; api_key "" removes the key.',
        ),
        Method("providers/delete", ProviderIdParams, ProviderDeleted, delete, summary="Remove a provider and its key."),
        Method(
            "providers/models",
            ProviderIdParams,
            ModelList,
            models,
            summary="The provider's models (phase-2 §8.1 ModelInfo).",
        ),
        Method(
            "providers/test",
            ProviderTestParams,
            ProviderTestResult,
            test,
            summary="Check a saved or unsaved provider configuration.",
        ),
        Method(
            "providers/health",
            ProviderHealthParams,
            ProviderHealthList,
            health,
            summary="Reachability of one or every provider.",
        ),
        Method(
            "chat/send",
            ChatParams,
            MetonaResponse,
            send,
            summary="One model call (retry + failover); the MetonaResponse.",
        ),
        Method(
            "chat/stream",
            ChatParams,
            MetonaResponse,
            stream,
            summary="One streamed model call: MetonaStreamEvent lines, then the MetonaResponse as the result.",
        ),
    ]


def notifications() -> list[Notification]:
    return [
        Notification(
            PROVIDER_SWITCHED,
            ProviderSwitchedParams,
            summary="The sidecar failed over to the configured fallback provider (IR 故障转移).",
        )
    ]


def local_notifications() -> list[Notification]:
    return [
        Notification(
            "local/modelProgress",
            LocalModelProgress,
            summary="The embedded local model is being prepared on first use (assemble, verify, requantize, convert).",
        )
    ]
