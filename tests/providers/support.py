"""Builders shared by the adapter tests: an IR request and a tool definition in the wire (camelCase) shape."""

from __future__ import annotations

from typing import Any

from sidecar.ir import MetonaRequest


def request(
    messages: list[dict[str, Any]] | None = None,
    *,
    params: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
    constraints: dict[str, Any] | None = None,
) -> MetonaRequest:
    data: dict[str, Any] = {
        "meta": {"sessionId": "s_1", "iteration": 1, "requestId": "r_1", "timestamp": 1, "agentVersion": "1.0.0"},
        "systemPrompt": {
            "roleDefinition": "You are Metona.",
            "outputConstraints": "Answer briefly.",
            "safetyGuidelines": "Be safe.",
            "dynamicReminders": "Today is Monday.",
        },
        "messages": messages or [{"role": "user", "content": "Hello", "timestamp": 1}],
        "params": params or {},
    }
    if tools is not None:
        data["tools"] = tools
    if constraints is not None:
        data["constraints"] = constraints
    return MetonaRequest.model_validate(data)


def tool(name: str, prop: str = "location") -> dict[str, Any]:
    return {
        "name": name,
        "description": f"the {name} tool",
        "parameters": {
            "type": "object",
            "properties": {prop: {"type": "string", "description": "where"}},
            "required": [prop],
        },
        "category": "network",
        "riskLevel": "safe",
        "requiresPermission": False,
        "timeoutMs": 1000,
    }
