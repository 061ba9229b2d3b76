"""What the sidecar knows about a model: context window, output limit, capabilities; in the IR's
MetonaModelInfo shape (the adapter surface) and in the phase-2 §8.1 ModelInfo shape (``providers/models``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..ir import MetonaModelInfo

# phase-2 §8.1 capability names
CHAT = "chat"
STREAMING = "streaming"
TOOL_CALLING = "tool_calling"
THINKING = "thinking"
VISION = "vision"
STRUCTURED_OUTPUT = "structured_output"

CONSERVATIVE = (CHAT, STREAMING)
"""What a model is assumed to do when the vendor does not say (§8.1: never claim tool calling or vision)."""


@dataclass(frozen=True)
class ModelSpec:
    CONSERVATIVE_CONTEXT: ClassVar[int] = 8192
    CONSERVATIVE_OUTPUT: ClassVar[int] = 4096

    id: str
    display_name: str = ""
    context_window: int = CONSERVATIVE_CONTEXT
    max_output_tokens: int = CONSERVATIVE_OUTPUT
    capabilities: tuple[str, ...] = CONSERVATIVE
    deprecated: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities

    def to_ir(self, provider_id: str) -> MetonaModelInfo:
        return MetonaModelInfo(
            id=self.id,
            provider_id=provider_id,
            display_name=self.display_name or self.id,
            context_window=self.context_window,
            max_output=self.max_output_tokens,
            supports_streaming=self.supports(STREAMING),
            supports_thinking=self.supports(THINKING),
            supports_images=self.supports(VISION),
            supports_tool_calling=self.supports(TOOL_CALLING),
            supports_structured_output=self.supports(STRUCTURED_OUTPUT),
        )

    def to_phase2(self) -> dict[str, Any]:
        return {
            "model": self.id,
            "display_name": self.display_name or self.id,
            "capabilities": list(self.capabilities),
            "context_window": self.context_window,
            "max_output_tokens": self.max_output_tokens,
            "deprecated": self.deprecated,
            "metadata": dict(self.metadata),
        }
