"""The seed's 完整示例 objects, as JSON, parse and re-serialise to the identical dict.

`Date.now()` / `t` are replaced by fixed numbers. Where the seed elides a required part with `/* ... */`
(example 2's systemPrompt, tool definitions and request2.meta) a concrete value is filled in; every field the
seed shows is kept as shown. The seed's request2 assistant message carries a tool call without `timestamp`,
which MetonaToolCall requires (seed interface), so it is added here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from sidecar.ir import (
    MetonaFinishReason,
    MetonaMessage,
    MetonaRequest,
    MetonaResponse,
    MetonaStreamEvent,
    MetonaToolCall,
    MetonaToolResult,
)

T = 1719000000000

EXAMPLE1_REQUEST = f"""
{{
  "meta": {{"sessionId": "s_abc", "iteration": 1, "requestId": "r_001", "timestamp": {T}, "agentVersion": "1.0.0"}},
  "systemPrompt": {{
    "roleDefinition": "你是一个专业的编程助手。",
    "outputConstraints": "用中文回答，代码块使用 ``` 包裹。",
    "safetyGuidelines": "不编造事实，不确定时如实说明。"
  }},
  "messages": [
    {{"role": "user", "content": "解释 JavaScript 的事件循环机制。", "timestamp": {T}}}
  ],
  "params": {{"maxTokens": 4096, "temperature": 0.0, "stream": false, "thinkingEnabled": false}}
}}
"""

EXAMPLE1_RESPONSE = f"""
{{
  "meta": {{"requestId": "r_001", "provider": "deepseek", "model": "deepseek-v4-pro", "latencyMs": 850,
            "timestamp": {T + 850}}},
  "content": "JavaScript 的事件循环（Event Loop）是...\\n\\n```js\\nconsole.log(1)...\\n```",
  "usage": {{"inputTokens": 120, "outputTokens": 350, "totalTokens": 470}},
  "finishReason": "stop"
}}
"""

SYSTEM_PROMPT = """{
  "roleDefinition": "你是一个数据分析助手。",
  "outputConstraints": "用中文回答。",
  "safetyGuidelines": "不编造事实。",
  "dynamicReminders": "先读取文件再分析。"
}"""

TOOLS = """[
  {"name": "read_file", "description": "读取文件内容",
   "parameters": {"type": "object",
                  "properties": {"file_path": {"type": "string", "description": "文件的绝对路径"},
                                 "encoding": {"type": "string", "description": "编码", "enum": ["utf-8", "gbk"]}},
                  "required": ["file_path"]},
   "category": "filesystem", "riskLevel": "low", "requiresPermission": false, "timeoutMs": 30000},
  {"name": "analyze_csv", "description": "分析 CSV 数据",
   "parameters": {"type": "object",
                  "properties": {"rows": {"type": "array", "description": "数据行",
                                          "items": {"type": "array", "description": "一行",
                                                    "items": {"type": "string", "description": "单元格"}}},
                                 "summary_only": {"type": "boolean", "description": "只输出摘要"}},
                  "required": ["rows"]},
   "category": "calculation", "riskLevel": "safe", "requiresPermission": false, "timeoutMs": 60000}
]"""

EXAMPLE2_REQUEST1 = f"""
{{
  "meta": {{"sessionId": "s_xyz", "iteration": 1, "requestId": "r_002", "timestamp": {T}, "agentVersion": "1.0.0"}},
  "systemPrompt": {SYSTEM_PROMPT},
  "messages": [
    {{"role": "user", "content": "读取 /home/user/data.csv 并分析内容。", "timestamp": {T}}}
  ],
  "tools": {TOOLS},
  "params": {{"stream": true, "thinkingEnabled": true}}
}}
"""

TOOL_CALL = f"""{{"id": "tc_1", "name": "read_file", "args": {{"file_path": "/home/user/data.csv"}}, "iteration": 1,
  "timestamp": {T + 700}}}"""

TOOL_RESULT = f"""{{"toolCallId": "tc_1", "toolName": "read_file", "result": "...", "success": true, "durationMs": 5,
  "timestamp": {T + 1000}, "summary": "文件 data.csv 包含 1000 行数据，字段为 name,age,email,city"}}"""

MESSAGES2 = f"""[
  {{"role": "user", "content": "读取 /home/user/data.csv 并分析内容。", "timestamp": {T}}},
  {{"role": "assistant", "content": "", "toolCalls": [{TOOL_CALL}], "timestamp": {T + 800}}},
  {{"role": "tool", "content": "", "toolResult": {TOOL_RESULT}, "timestamp": {T + 1000}}}
]"""

EXAMPLE2_REQUEST2 = f"""
{{
  "meta": {{"sessionId": "s_xyz", "iteration": 2, "requestId": "r_003", "timestamp": {T + 1100},
            "agentVersion": "1.0.0"}},
  "systemPrompt": {SYSTEM_PROMPT},
  "messages": {MESSAGES2},
  "tools": {TOOLS},
  "params": {{"stream": true, "thinkingEnabled": false}}
}}
"""

CASES: list[tuple[str, type[BaseModel], str]] = [
    ("example1.request", MetonaRequest, EXAMPLE1_REQUEST),
    ("example1.response", MetonaResponse, EXAMPLE1_RESPONSE),
    ("example2.request1", MetonaRequest, EXAMPLE2_REQUEST1),
    ("example2.request2", MetonaRequest, EXAMPLE2_REQUEST2),
    ("example2.toolCall", MetonaToolCall, TOOL_CALL),
    ("example2.toolResult", MetonaToolResult, TOOL_RESULT),
]
CASES += [(f"example2.messages[{i}]", MetonaMessage, json.dumps(m)) for i, m in enumerate(json.loads(MESSAGES2))]


@pytest.mark.parametrize(("name", "model", "text"), CASES, ids=[c[0] for c in CASES])
def test_example_round_trips_to_the_identical_dict(name: str, model: type[BaseModel], text: str) -> None:
    expected: dict[str, Any] = json.loads(text)
    parsed = model.model_validate_json(text)
    assert parsed.model_dump(mode="json", by_alias=True) == expected
    assert parsed.model_dump(mode="json") == expected  # camelCase without asking
    assert json.loads(parsed.model_dump_json()) == expected
    assert model.model_validate(expected) == parsed


def test_example_values_land_in_the_typed_fields() -> None:
    req = MetonaRequest.model_validate_json(EXAMPLE2_REQUEST2)
    assert req.meta.iteration == 2
    assert req.messages[1].tool_calls is not None
    assert req.messages[1].tool_calls[0].args == {"file_path": "/home/user/data.csv"}
    assert req.messages[2].tool_result is not None
    assert req.messages[2].tool_result.summary == "文件 data.csv 包含 1000 行数据，字段为 name,age,email,city"
    assert req.tools is not None
    rows = req.tools[1].parameters.properties["rows"]
    assert rows.items is not None and rows.items.items is not None
    assert rows.items.items.type == "string"
    resp = MetonaResponse.model_validate_json(EXAMPLE1_RESPONSE)
    assert resp.finish_reason is MetonaFinishReason.STOP
    assert resp.content.endswith("console.log(1)...\n```")


def test_example2_stream_carries_the_same_tool_call() -> None:
    call = MetonaToolCall.model_validate_json(TOOL_CALL)
    event = MetonaStreamEvent.tool_call_complete("r_002", "s_xyz", 1, 3, T + 700, call)
    assert json.loads(event.to_line())["toolCall"] == json.loads(TOOL_CALL)
