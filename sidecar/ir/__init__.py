"""The Metona IR (``metona-ir-standard.md`` v1.0) as pydantic v2 models.

camelCase on the wire, enums as their lowercase values, absent optional fields omitted (see :mod:`.base`).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from .adapter import IMetonaProviderAdapter, MetonaModelInfo, MetonaPricing, StreamEventCallback
from .base import WireModel
from .context import MetonaContext, MetonaCurrentTask
from .errors import MetonaError, MetonaErrorCode
from .events import MetonaStreamEvent, MetonaStreamEventType, ToolCallDelta
from .memory import MetonaMemoryItem, MetonaMemorySource, MetonaMemoryType
from .messages import MetonaImageContent, MetonaImageDetail, MetonaMessage, MetonaRole
from .request import (
    MetonaConstraints,
    MetonaGenerationParams,
    MetonaRequest,
    MetonaRequestMeta,
    MetonaResponseFormat,
    MetonaSystemPrompt,
    MetonaThinkingEffort,
)
from .response import MetonaFinishReason, MetonaPerfStats, MetonaResponse, MetonaResponseMeta, MetonaTokenUsage
from .thinking import MetonaThinking, MetonaThinkingStatus
from .tools import (
    MetonaParamField,
    MetonaParamType,
    MetonaRiskLevel,
    MetonaToolCall,
    MetonaToolCategory,
    MetonaToolDef,
    MetonaToolParams,
    MetonaToolResult,
)

IR_MODELS: tuple[type[BaseModel], ...] = (
    MetonaRequest,
    MetonaRequestMeta,
    MetonaSystemPrompt,
    MetonaGenerationParams,
    MetonaConstraints,
    MetonaResponseFormat,
    MetonaMessage,
    MetonaImageContent,
    MetonaToolDef,
    MetonaToolParams,
    MetonaParamField,
    MetonaToolCall,
    MetonaToolResult,
    MetonaResponse,
    MetonaResponseMeta,
    MetonaPerfStats,
    MetonaTokenUsage,
    MetonaStreamEvent,
    ToolCallDelta,
    MetonaThinking,
    MetonaError,
    MetonaContext,
    MetonaCurrentTask,
    MetonaMemoryItem,
    MetonaModelInfo,
    MetonaPricing,
)
"""Every IR model (the schema generator emits ``ipc_schema/defs/ir.json`` from these)."""

IR_ENUMS: tuple[type[StrEnum], ...] = (
    MetonaToolCategory,
    MetonaRiskLevel,
    MetonaFinishReason,
    MetonaStreamEventType,
    MetonaErrorCode,
)

__all__ = [
    "IR_ENUMS",
    "IR_MODELS",
    "IMetonaProviderAdapter",
    "MetonaConstraints",
    "MetonaContext",
    "MetonaCurrentTask",
    "MetonaError",
    "MetonaErrorCode",
    "MetonaFinishReason",
    "MetonaGenerationParams",
    "MetonaImageContent",
    "MetonaImageDetail",
    "MetonaMemoryItem",
    "MetonaMemorySource",
    "MetonaMemoryType",
    "MetonaMessage",
    "MetonaModelInfo",
    "MetonaParamField",
    "MetonaParamType",
    "MetonaPerfStats",
    "MetonaPricing",
    "MetonaRequest",
    "MetonaRequestMeta",
    "MetonaResponse",
    "MetonaResponseFormat",
    "MetonaResponseMeta",
    "MetonaRiskLevel",
    "MetonaRole",
    "MetonaStreamEvent",
    "MetonaStreamEventType",
    "MetonaSystemPrompt",
    "MetonaThinking",
    "MetonaThinkingEffort",
    "MetonaThinkingStatus",
    "MetonaTokenUsage",
    "MetonaToolCall",
    "MetonaToolCategory",
    "MetonaToolDef",
    "MetonaToolParams",
    "MetonaToolResult",
    "StreamEventCallback",
    "ToolCallDelta",
    "WireModel",
]
