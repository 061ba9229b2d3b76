"""Agent tools: the :class:`Tool` seam, the :class:`ToolRegistry` and the nine built-in tools."""

from __future__ import annotations

from .base import Tool, ToolContext, ToolError, ToolOutput, ToolParams
from .builtin import GetCurrentTime, ToolServices, builtin_tools, default_registry
from .calculator import Calculator
from .files import ListDirectory, ReadFile, SearchFiles, WriteFile, resolve_in_workspace
from .knowledge import KnowledgeSearch, MemorySearch
from .registry import MAX_SUMMARY_CHARS, ToolExecution, ToolRegistry
from .web import HttpGet

__all__ = [
    "MAX_SUMMARY_CHARS",
    "Calculator",
    "GetCurrentTime",
    "HttpGet",
    "KnowledgeSearch",
    "ListDirectory",
    "MemorySearch",
    "ReadFile",
    "SearchFiles",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolExecution",
    "ToolOutput",
    "ToolParams",
    "ToolRegistry",
    "ToolServices",
    "WriteFile",
    "builtin_tools",
    "default_registry",
    "resolve_in_workspace",
]
