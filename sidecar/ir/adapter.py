"""Provider adapter seam: MetonaModelInfo, MetonaPricing, IMetonaProviderAdapter (IR standard 🔗)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from pydantic import Field

from .base import WireModel
from .events import MetonaStreamEvent
from .request import MetonaRequest
from .response import MetonaResponse

StreamEventCallback = Callable[[MetonaStreamEvent], Awaitable[None] | None]
"""``onEvent`` of ``sendStream``: called once per event, in order; may be sync or async."""


class MetonaPricing(WireModel):
    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)
    currency: str


class MetonaModelInfo(WireModel):
    id: str
    provider_id: str
    display_name: str
    context_window: int = Field(ge=0)
    max_output: int = Field(ge=0)
    supports_streaming: bool
    supports_thinking: bool
    supports_images: bool
    supports_tool_calling: bool
    supports_structured_output: bool
    pricing: MetonaPricing | None = None


@runtime_checkable
class IMetonaProviderAdapter(Protocol):
    """What every LLM provider adapter implements: IR in, IR out; vendor types never cross it."""

    @property
    def provider_id(self) -> str:
        """The provider id, e.g. ``deepseek``."""
        ...

    @property
    def supported_models(self) -> list[str]: ...

    def get_context_window(self, model: str) -> int: ...

    async def health_check(self) -> bool: ...

    async def send(self, request: MetonaRequest) -> MetonaResponse: ...

    async def send_stream(self, request: MetonaRequest, on_event: StreamEventCallback) -> MetonaResponse:
        """Stream ``request``, calling ``on_event`` per event; return the assembled response at the end."""
        ...

    async def list_models(self) -> list[MetonaModelInfo]: ...
