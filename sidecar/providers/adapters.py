"""Protocol → adapter class (imported on first use: each adapter module is only loaded when configured)."""

from __future__ import annotations

from typing import Any

from .base import BaseAdapter, ProviderConfig
from .presets import ANTHROPIC, LOCAL, MOCK, OLLAMA, OPENAI


def adapter_class(protocol: str) -> type[BaseAdapter]:
    """The adapter of a keyed or keyless vendor protocol (``local`` needs its runtime: :func:`build_adapter`)."""
    if protocol == OPENAI:
        from .openai_compat import OpenAICompatAdapter

        return OpenAICompatAdapter
    if protocol == ANTHROPIC:
        from .anthropic import AnthropicAdapter

        return AnthropicAdapter
    if protocol == OLLAMA:
        from .ollama import OllamaAdapter

        return OllamaAdapter
    if protocol == MOCK:
        from .mock import MockAdapter

        return MockAdapter
    raise ValueError(f"unknown protocol {protocol!r}")


def build_adapter(config: ProviderConfig, *, transport: Any = None, local_runtime: Any = None) -> BaseAdapter:
    """``local_runtime``: the sidecar's :class:`~sidecar.localmodel.client.LocalRuntime`, given to ``local``
    adapters only (the composition root builds it; None where there is none)."""
    if config.protocol == LOCAL:
        from .local import LocalAdapter

        return LocalAdapter(config, transport=transport, runtime=local_runtime)
    return adapter_class(config.protocol)(config, transport=transport)
