// Compiled by scripts/gen_ipc_schema.py (tsc --noEmit --strict) against the generated declarations.
// It must compile, and each @ts-expect-error line must really be an error: if the generated types
// became too loose (e.g. `any`), tsc reports the unused @ts-expect-error and the check fails.
import type {
  InitializeResult,
  MetonaError,
  MetonaRequest,
  MetonaResponse,
  MetonaSidecarIpc,
  MetonaStreamEvent,
} from "./metona-sidecar";

type Methods = MetonaSidecarIpc["methods"];
type Params<M extends keyof Methods> = Methods[M]["params"];
type Result<M extends keyof Methods> = Methods[M]["result"];

// The IR seed's stream lines (流式传输协议).
const lines: MetonaStreamEvent[] = [
  { type: "thinking_start", requestId: "r_1", sessionId: "s_1", iteration: 1, seq: 0, timestamp: 1719000000000 },
  { type: "reasoning_delta", requestId: "r_1", sessionId: "s_1", iteration: 1, seq: 1, timestamp: 1719000000100, delta: "让我先分析问题的关键点..." },
  {
    type: "tool_call_complete", requestId: "r_1", sessionId: "s_1", iteration: 1, seq: 5, timestamp: 1719000000700,
    toolCall: { id: "tc_1", name: "read_file", args: { file_path: "/home/user/data.csv" }, iteration: 1, timestamp: 1719000000700 },
  },
  {
    type: "usage", requestId: "r_1", sessionId: "s_1", iteration: 1, seq: 6, timestamp: 1719000000800,
    usage: { inputTokens: 120, outputTokens: 45, totalTokens: 165 },
  },
  { type: "done", requestId: "r_1", sessionId: "s_1", iteration: 1, seq: 7, timestamp: 1719000000800 },
];

const request: MetonaRequest = {
  meta: { sessionId: "s_abc", iteration: 1, requestId: "r_001", timestamp: 1719000000000, agentVersion: "1.0.0" },
  systemPrompt: { roleDefinition: "你是一个专业的编程助手。", outputConstraints: "用中文回答。", safetyGuidelines: "不编造事实。" },
  messages: [{ role: "user", content: "解释 JavaScript 的事件循环机制。", timestamp: 1719000000000 }],
  params: { maxTokens: 4096, temperature: 0.0, stream: false, thinkingEnabled: false, thinkingEffort: "high" },
};

const response: MetonaResponse = {
  meta: { requestId: "r_001", provider: "deepseek", model: "deepseek-v4-pro", latencyMs: 850, timestamp: 1719000000850 },
  content: "JavaScript 的事件循环……",
  usage: { inputTokens: 120, outputTokens: 350, totalTokens: 470 },
  finishReason: "stop",
};

const err: MetonaError = { code: "rate_limited", message: "slow down", retryable: true, retryAfterMs: 1000 };

const init: Params<"initialize"> = { client_info: { name: "metona-desktop", version: "1.0.0" }, process_id: 42 };
function useInit(r: Result<"initialize">): string {
  return `${r.server_info.name} ${r.server_info.version} ${r.protocol_version} ${Object.keys(r.capabilities.components).length} ${r.capabilities.limits.max_line_bytes}`;
}
const sub: Params<"events/subscribe"> = { resource_id: "job_1", after_sequence: 0 };
const shut: Result<"shutdown"> = null;

// @ts-expect-error: not an IR stream event type
const badType: MetonaStreamEvent = { type: "text", requestId: "r", sessionId: "s", iteration: 1, seq: 0, timestamp: 0 };
// @ts-expect-error: seq is required
const noSeq: MetonaStreamEvent = { type: "done", requestId: "r", sessionId: "s", iteration: 1, timestamp: 0 };
// @ts-expect-error: thinkingEffort has four values
const badEffort: MetonaRequest["params"] = { thinkingEffort: "extreme" };
// @ts-expect-error: unknown method
type Nope = Params<"no/such/method">;
// @ts-expect-error: IR errors use the lowercase IR codes
const badCode: MetonaError = { code: "RATE_LIMITED", message: "x", retryable: true };

export const used: unknown[] = [lines, request, response, err, init, useInit, sub, shut, badType, noSeq, badEffort, badCode];
export type { Nope };
export type Check = InitializeResult;
