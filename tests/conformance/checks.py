"""The assertions of a conformance run: the request that reached the vendor, the stream of MetonaStreamEvents
(IR ⚡ rules, phase-2 §8.2), the final MetonaResponse against the events and against an independent reading of
the recording (:mod:`.oracle`), and the error mapping.

Every problem found is collected; a run fails with all of them, one per line.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from sidecar.ir import MetonaFinishReason, MetonaStreamEvent, MetonaStreamEventType
from sidecar.providers.capabilities import THINKING
from sidecar.providers.errors import phase2_code

from . import oracle
from .suite import API_KEY, Run

T = MetonaStreamEventType
_REASONING_TYPES = (T.THINKING_START, T.REASONING_DELTA, T.THINKING_END)


class Problems(list[str]):
    def expect(self, ok: object, message: str) -> bool:
        if not ok:
            self.append(message)
        return bool(ok)


def check_run(run: Run) -> list[str]:
    problems = Problems()
    pair = run.pair
    a = pair.case.assertions_for(pair.target.name)
    exp = oracle.expect(pair.target.protocol, run.recording, think_tags=bool(a.get("think_tags")))
    _check_request(run, a, problems)
    if pair.case.stream:
        _check_stream(run, exp, problems)
        terminal = str(a.get("terminal_event", "Done")).lower()  # phase-2 §8.3 names it "Done"
        if run.events:
            last = run.events[-1].type.value
            problems.expect(last == terminal, f"stream: the terminal event is {last}, want {terminal}")
    _check_response(run, a, exp, problems)
    _check_error(run, a, problems)
    return problems


# ---- the request ---------------------------------------------------------------------------------------------


def _check_request(run: Run, a: dict[str, Any], p: Problems) -> None:
    target, model, stream = run.pair.target, run.pair.model, run.pair.case.stream
    if not p.expect(len(run.received) == 1, f"request: expected 1 HTTP request, got {_paths(run)}"):
        if not run.received:
            return
    req = run.received[0]
    path = req.path.split("?", 1)[0]
    p.expect(
        req.method == "POST" and path == target.endpoint, f"request: {req.method} {path}, want POST {target.endpoint}"
    )
    if target.protocol == "openai":
        p.expect(req.headers.get("authorization") == f"Bearer {API_KEY}", "request: no 'Authorization: Bearer <key>'")
    elif target.protocol == "anthropic":
        p.expect(req.headers.get("x-api-key") == API_KEY, "request: no 'x-api-key: <key>'")
        p.expect(bool(req.headers.get("anthropic-version")), "request: no anthropic-version header")
    body = req.json
    if not p.expect(isinstance(body, dict), "request: the body is not a JSON object"):
        return
    p.expect(body.get("model") == model, f"request: model {body.get('model')!r}, want {model!r}")
    if target.protocol == "ollama":
        p.expect(body.get("stream") is stream, f"request: ollama stream={body.get('stream')!r}, want {stream}")
    else:
        p.expect(bool(body.get("stream")) is stream, f"request: stream={body.get('stream')!r}, want {stream}")
    if target.name == "openai" and stream:
        p.expect(
            (body.get("stream_options") or {}).get("include_usage") is True,
            "request: OpenAI streams report usage only with stream_options.include_usage",
        )
    role_definition = run.request.system_prompt.role_definition
    p.expect(
        role_definition in _system_text(body, target.protocol), "request: the system prompt is not in the system slot"
    )
    if "tools_offered" in a:
        names = _tool_names(body, target.protocol)
        p.expect(sorted(names) == sorted(a["tools_offered"]), f"request: tools {names}, want {a['tools_offered']}")
    if a.get("temperature_default"):
        temp = (
            (body.get("options") or {}).get("temperature") if target.protocol == "ollama" else body.get("temperature")
        )
        p.expect(temp == 0.0 and temp is not None, f"request: temperature {temp!r}, want the IR default 0.0")
    if target.protocol == "anthropic":
        max_tokens = body.get("max_tokens")
        p.expect(isinstance(max_tokens, int) and max_tokens > 0, "request: anthropic needs max_tokens")
        budget = (body.get("thinking") or {}).get("budget_tokens")
        if budget is not None and isinstance(max_tokens, int):
            p.expect(budget < max_tokens, f"request: thinking.budget_tokens {budget} must be < max_tokens {max_tokens}")
    if a.get("params_mapped"):
        _check_params(body, target.protocol, a["params_mapped"], p)
    if a.get("no_tools_offered"):
        choice = body.get("tool_choice")
        none = choice == "none" or (isinstance(choice, dict) and choice.get("type") == "none")
        p.expect(not body.get("tools") or none, f"request: tools offered with maxToolCalls 0 (tool_choice {choice!r})")
    if a.get("image_sent"):
        _check_image(body, target.protocol, a["image_sent"], p)
    if a.get("tool_round"):
        _check_tool_round(body, target.protocol, run.request, p)
    want = (a.get("payload") or {}).get(target.name)
    if want is not None:
        for problem in _subset(want, body, "body"):
            p.append(f"request: {problem}")
    text = json.dumps(body, ensure_ascii=False)
    for marker in [
        *(a.get("request_contains") or []),
        *((a.get("request_contains_by_target") or {}).get(target.name, [])),
    ]:
        p.expect(marker in text, f"request: {marker!r} is not in the body")
    for marker in a.get("request_excludes") or []:
        p.expect(marker not in text, f"request: {marker!r} should not be in the body")


def _check_params(body: dict[str, Any], protocol: str, want: dict[str, Any], p: Problems) -> None:
    """temperature / top_p / max tokens / stop in the vendor's own names and places."""
    if protocol == "ollama":
        opts = body.get("options") or {}
        got = {
            "temperature": opts.get("temperature"),
            "top_p": opts.get("top_p"),
            "max_tokens": opts.get("num_predict"),
        }
        got["stop"] = opts.get("stop")
    elif protocol == "anthropic":
        got = {"temperature": body.get("temperature"), "top_p": body.get("top_p"), "max_tokens": body.get("max_tokens")}
        got["stop"] = body.get("stop_sequences")
        if got["top_p"] is None:  # recent Claude models refuse temperature and top_p together: dropping it is fine
            got["top_p"] = want["top_p"]
    else:
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        got = {"temperature": body.get("temperature"), "top_p": body.get("top_p"), "max_tokens": max_tokens}
        stop = body.get("stop")
        got["stop"] = [stop] if isinstance(stop, str) else stop
    for key, value in want.items():
        p.expect(got.get(key) == value, f"request: {key} sent as {got.get(key)!r}, want {value!r} ({protocol})")


def _check_image(body: dict[str, Any], protocol: str, want: dict[str, str], p: Problems) -> None:
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    data_uri = f"data:{want['media_type']};base64,{want['data']}"
    found = False
    for message in users:
        if protocol == "ollama":
            found |= want["data"] in (message.get("images") or [])
            continue
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if protocol == "anthropic":
                source = part.get("source") or {}
                found |= part.get("type") == "image" and source == {
                    "type": "base64",
                    "media_type": want["media_type"],
                    "data": want["data"],
                }
            else:
                found |= part.get("type") == "image_url" and (part.get("image_url") or {}).get("url") == data_uri
    shape = {"ollama": "message.images[]", "anthropic": "an image block (base64 source)"}.get(
        protocol, "image_url part"
    )
    p.expect(found, f"request: the image is not in a user message as {shape}")


def _check_tool_round(body: dict[str, Any], protocol: str, request: Any, p: Problems) -> None:
    """The assistant's tool call and the tool's result in the vendor's own message shapes, linked by the id."""
    assistant = next(m for m in request.messages if m.tool_calls)
    call = assistant.tool_calls[0]
    summary = next(m for m in request.messages if m.tool_result).tool_result.summary
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if protocol == "anthropic":
        blocks = [b for m in messages if m.get("role") == "assistant" for b in _blocks(m)]
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        ok = any(b.get("id") == call.id and b.get("name") == call.name and b.get("input") == call.args for b in uses)
        p.expect(ok, f"request: no assistant tool_use block {{id: {call.id}, name, input}}")
        results = [b for m in messages if m.get("role") == "user" for b in _blocks(m) if b.get("type") == "tool_result"]
        ok = any(b.get("tool_use_id") == call.id and summary in json.dumps(b, ensure_ascii=False) for b in results)
        p.expect(ok, f"request: no user tool_result block for {call.id} carrying the summary")
        if assistant.reasoning_signature:
            kinds = [b.get("type") for b in blocks]
            p.expect(kinds[:1] == ["thinking"], f"request: the thinking block must come first, got {kinds}")
        return
    calls = [c for m in messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    fns = [c.get("function") or {} for c in calls]
    if protocol == "ollama":
        ok = any(f.get("name") == call.name and f.get("arguments") == call.args for f in fns)
        p.expect(ok, "request: no assistant tool_calls[].function {name, arguments: object}")
    else:
        ok = any(
            c.get("id") == call.id
            and f.get("name") == call.name
            and _json_or_raw(f.get("arguments") or "") == call.args
            for c, f in zip(calls, fns, strict=True)
        )
        p.expect(ok, f"request: no assistant tool_calls[] {{id: {call.id}, function: {{name, arguments: JSON text}}}}")
    tools = [m for m in messages if m.get("role") == "tool"]
    ok = any(
        summary in str(m.get("content")) and (protocol == "ollama" or m.get("tool_call_id") == call.id) for m in tools
    )
    p.expect(ok, f"request: no tool message for {call.id} carrying the summary")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _paths(run: Run) -> list[str]:
    return [f"{r.method} {r.path}" for r in run.received]


def _system_text(body: dict[str, Any], protocol: str) -> str:
    if protocol == "anthropic":
        system = body.get("system")
        if isinstance(system, list):
            return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
        return system if isinstance(system, str) else ""
    messages = body.get("messages") or []
    parts = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") in ("system", "developer")]
    return "\n".join(c if isinstance(c, str) else json.dumps(c) for c in parts)


def _tool_names(body: dict[str, Any], protocol: str) -> list[str]:
    tools = body.get("tools") or []
    if protocol == "anthropic":
        return [t.get("name") for t in tools]
    return [(t.get("function") or {}).get("name") for t in tools]


def _subset(want: Any, got: Any, where: str) -> list[str]:
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{where} is {got!r}, want an object with {want!r}"]
        out: list[str] = []
        for key, value in want.items():
            if key not in got:
                out.append(f"{where}.{key} is missing (want {value!r})")
            else:
                out.extend(_subset(value, got[key], f"{where}.{key}"))
        return out
    same_kind = isinstance(want, bool) == isinstance(got, bool)  # True is not 1 here
    if want != got or not same_kind:
        return [f"{where} is {got!r}, want {want!r}"]
    return []


# ---- the stream ----------------------------------------------------------------------------------------------


def _check_stream(run: Run, exp: oracle.Expected, p: Problems) -> None:
    events, response = run.events, run.response
    if not stream_invariants(events, response, run.request, p):
        return
    types = [e.type for e in events]
    if response.error is None and exp.output_tokens is not None and T.USAGE not in types:
        p.append("stream: the vendor reported usage but no usage event was sent")
    if not exp.reasoning:
        p.expect(
            not any(t in _REASONING_TYPES for t in types),
            "stream: reasoning events from an answer without reasoning (phase-2 §8.2: no fake ThinkingDelta)",
        )


def stream_invariants(events: list[MetonaStreamEvent], response: Any, request: Any, p: Problems) -> bool:
    """The IR's stream rules, whatever the vendor: seq, one done last, error · done, usage · done, the thinking
    frame, and the final response made of the events. False when there are no events at all."""
    meta = request.meta
    if not p.expect(events, "stream: no events"):
        return False
    types = [e.type for e in events]
    p.expect(
        [e.seq for e in events] == list(range(len(events))), f"stream: seq {[e.seq for e in events]} is not 0..n-1"
    )
    for e in events:
        if (e.request_id, e.session_id, e.iteration) != (meta.request_id, meta.session_id, meta.iteration):
            p.append(f"stream: seq {e.seq} carries {e.request_id}/{e.session_id}/{e.iteration}, not the request's")
            break
    for e in events:
        try:  # the events are built unvalidated (model_construct): validate them here, and their wire line
            valid = MetonaStreamEvent.model_validate(e.model_dump())
            again = MetonaStreamEvent.from_line(e.to_line())
        except ValueError as exc:
            p.append(f"stream: seq {e.seq} is not a valid MetonaStreamEvent / wire line ({exc})")
            break
        if again.model_dump() != valid.model_dump():
            p.append(f"stream: seq {e.seq} changes through its wire line")
            break
    p.expect(
        types.count(T.DONE) == 1 and types[-1] is T.DONE, f"stream: want exactly one done, last; got {_brief(types)}"
    )
    errors = [i for i, t in enumerate(types) if t is T.ERROR]
    if response.error is not None:
        ok = errors == [len(events) - 2]
        if p.expect(ok, f"stream: a failure must end error · done (one error); got {_brief(types)}"):
            p.expect(events[-2].error == response.error, "stream: the error event differs from response.error")
    else:
        p.expect(not errors, f"stream: error event(s) in a successful stream: {_brief(types)}")
    usage = [i for i, t in enumerate(types) if t is T.USAGE]
    if usage:
        p.expect(usage == [len(events) - 2], f"stream: usage must come once, right before done; got {_brief(types)}")
        p.expect(events[usage[-1]].usage == response.usage, "stream: the usage event differs from response.usage")
    _check_framing(types, p)
    text = "".join(e.delta or "" for e in events if e.type is T.TEXT_DELTA)
    reasoning = "".join(e.delta or "" for e in events if e.type is T.REASONING_DELTA)
    p.expect(text == response.content, "stream: content is not the text deltas concatenated")
    p.expect(reasoning == (response.reasoning_content or ""), "stream: reasoningContent is not the reasoning deltas")
    completes = [e.tool_call for e in events if e.type is T.TOOL_CALL_COMPLETE]
    for call in completes:
        if call is None or not isinstance(call.args, dict) or not call.id or not call.name:
            p.append(f"stream: tool_call_complete without id/name/dict args: {call!r}")
    ids = [c.id for c in completes if c is not None]
    p.expect(len(ids) == len(set(ids)), f"stream: tool call ids repeat: {ids}")
    p.expect(completes == (response.tool_calls or []), "stream: toolCalls are not the tool_call_complete events")
    if response.error is None:  # a failed stream may leave a call unfinished
        _check_tool_deltas(events, completes, p)
    return True


def _check_framing(types: list[MetonaStreamEventType], p: Problems) -> None:
    inside = False
    for i, t in enumerate(types):
        if t is T.THINKING_START:
            p.expect(not inside, f"stream: thinking_start inside a thinking frame at seq {i}")
            inside = True
        elif t is T.THINKING_END:
            p.expect(inside, f"stream: thinking_end without thinking_start at seq {i}")
            inside = False
        elif t is T.REASONING_DELTA:
            p.expect(inside, f"stream: reasoning_delta outside thinking_start/thinking_end at seq {i}")
        elif t in (T.TEXT_DELTA, T.TOOL_CALL_DELTA, T.TOOL_CALL_COMPLETE, T.USAGE, T.ERROR, T.DONE):
            if inside:
                p.append(f"stream: {t.value} at seq {i} inside an open thinking frame")
                inside = False


def _check_tool_deltas(events: list[MetonaStreamEvent], completes: list[Any], p: Problems) -> None:
    groups: dict[int, list[str]] = {}
    for e in events:
        if e.type is T.TOOL_CALL_DELTA and e.tool_call_delta is not None:
            d = e.tool_call_delta
            slot = groups.setdefault(d.index, ["", ""])
            slot[0] += d.name or ""
            slot[1] += d.args_delta or ""
    if not groups:
        return
    from_deltas = Counter(_key(name, _json_or_raw(args)) for name, args in groups.values())
    from_completes = Counter(_key(c.name, c.args) for c in completes if c is not None)
    p.expect(
        from_deltas <= from_completes,
        f"stream: tool_call_delta fragments {dict(from_deltas)} do not add up to the completed calls",
    )


def _json_or_raw(text: str) -> Any:
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


def _key(name: str, args: Any) -> str:
    return name + " " + json.dumps(args, sort_keys=True)


def _brief(types: list[MetonaStreamEventType]) -> str:
    out: list[str] = []
    for t in types:
        if out and out[-1].startswith(t.value):
            head, _, n = out[-1].partition("×")
            out[-1] = f"{head}×{int(n or 1) + 1}"
        else:
            out.append(t.value)
    return " · ".join(out)


# ---- the response ----------------------------------------------------------------------------------------------


def _check_response(run: Run, a: dict[str, Any], exp: oracle.Expected, p: Problems) -> None:
    r, pair = run.response, run.pair
    p.expect(r.meta.request_id == run.request.meta.request_id, "response: meta.requestId is not the request's")
    p.expect(r.meta.provider == pair.target.name, f"response: meta.provider {r.meta.provider!r}")
    p.expect(r.meta.model == pair.model, f"response: meta.model {r.meta.model!r}, want {pair.model!r}")
    finish = a.get("finish_reason")
    if finish:
        p.expect(
            r.finish_reason == MetonaFinishReason(finish), f"response: finishReason {r.finish_reason}, want {finish}"
        )
    if a.get("content_required"):
        p.expect(bool(r.content), "response: empty content")
    if a.get("reasoning_required"):
        p.expect(bool(r.reasoning_content), "response: no reasoningContent")
    calls = r.tool_calls or []
    if "tool_calls" in a:
        p.expect(len(calls) == a["tool_calls"], f"response: {len(calls)} tool calls, want {a['tool_calls']}")
    if "tool_calls_min" in a:
        p.expect(len(calls) >= a["tool_calls_min"], f"response: {len(calls)} tool calls, want ≥ {a['tool_calls_min']}")
    spec = next((m for m, _ in pair.target.models() if m.id == pair.model), None)
    if spec is not None and not spec.supports(THINKING):
        p.expect(not r.reasoning_content, f"response: reasoningContent from {pair.model}, a model without thinking")
    # against the independent reading of the recording
    p.expect(r.content == exp.text, f"response: content {_short(r.content)} != recorded text {_short(exp.text)}")
    p.expect(
        (r.reasoning_content or "") == exp.reasoning,
        f"response: reasoningContent {_short(r.reasoning_content or '')} != recorded {_short(exp.reasoning)}",
    )
    if r.error is None:
        got = [(c.name, c.args) for c in calls]
        p.expect(got == exp.tool_calls, f"response: toolCalls {got} != recorded {exp.tool_calls}")
        if len(calls) == len(exp.tool_call_ids):
            for call, vendor_id in zip(calls, exp.tool_call_ids, strict=True):
                # the vendor's id is what its next request must reference in the tool result
                p.expect(
                    vendor_id is None or call.id == vendor_id,
                    f"response: tool call id {call.id!r}, vendor's {vendor_id!r}",
                )
        if exp.signature:
            p.expect(
                r.reasoning_signature == exp.signature, "response: reasoningSignature is not the thinking signature"
            )
        _check_usage(run, a, exp, p)


def _check_usage(run: Run, a: dict[str, Any], exp: oracle.Expected, p: Problems) -> None:
    u, protocol = run.response.usage, run.pair.target.protocol
    if a.get("usage_required"):
        p.expect(u.total_tokens > 0 and u.output_tokens > 0, f"response: usage required, got {u.model_dump()}")
    if exp.output_tokens is not None:
        p.expect(
            u.output_tokens == exp.output_tokens,
            f"response: outputTokens {u.output_tokens}, recorded {exp.output_tokens}",
        )
    if exp.input_tokens is not None:
        if protocol == "anthropic":  # cache reads/writes may be added to input_tokens
            ok = u.input_tokens >= exp.input_tokens
        else:
            ok = u.input_tokens == exp.input_tokens
        p.expect(ok, f"response: inputTokens {u.input_tokens}, recorded {exp.input_tokens}")
    if exp.input_tokens is not None or exp.output_tokens is not None:
        p.expect(
            u.total_tokens >= max(u.input_tokens, u.output_tokens), f"response: totalTokens {u.total_tokens} too small"
        )
    if exp.reasoning_tokens:  # a reported 0 may stay absent
        p.expect(
            u.reasoning_tokens == exp.reasoning_tokens,
            f"response: reasoningTokens {u.reasoning_tokens}, recorded {exp.reasoning_tokens}",
        )
    if exp.cache_hit_tokens is not None:
        p.expect(
            u.cache_hit_tokens == exp.cache_hit_tokens or (exp.cache_hit_tokens == 0 and u.cache_hit_tokens is None),
            f"response: cacheHitTokens {u.cache_hit_tokens}, recorded {exp.cache_hit_tokens}",
        )


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


# ---- errors --------------------------------------------------------------------------------------------------


def _check_error(run: Run, a: dict[str, Any], p: Problems) -> None:
    err, pair = run.response.error, run.pair
    if "error_code" not in a:
        p.expect(err is None, f"response: unexpected error {err.code if err else ''}: {err.message if err else ''}")
        return
    if not p.expect(err is not None, f"response: no error, want {a['error_code']}"):
        return
    assert err is not None
    p.expect(err.code == a["error_code"], f"error: code {err.code.value}, want {a['error_code']} ({err.message})")
    if a.get("retryable") is not None:
        p.expect(err.retryable is a["retryable"], f"error: retryable {err.retryable}, want {a['retryable']}")
    if a.get("retry_after_ms") == "from_headers":
        want = retry_after_from_headers(run.recording.headers)
        if want == "date":
            p.expect(err.retry_after_ms is not None, "error: Retry-After (HTTP date) not reported as retryAfterMs")
        else:
            p.expect(err.retry_after_ms == want, f"error: retryAfterMs {err.retry_after_ms}, want {want} (headers)")
    if a.get("provider_code_required"):
        p.expect(bool(err.provider_code), "error: no providerCode")
    p.expect(err.provider == pair.target.name, f"error: provider {err.provider!r}")
    exc = run.error
    if "interrupted" in a or "phase2_code" in a:
        if not p.expect(exc is not None, "error: the adapter's run did not raise a ProviderError"):
            return
        assert exc is not None
        p.expect(exc.error == err, "error: the raised ProviderError differs from response.error")
        if "interrupted" in a:
            p.expect(
                exc.interrupted is a["interrupted"], f"error: interrupted {exc.interrupted}, want {a['interrupted']}"
            )
        if "phase2_code" in a:
            code, _status = phase2_code(exc.error, interrupted=exc.interrupted)
            p.expect(code == a["phase2_code"], f"error: phase-2 code {code}, want {a['phase2_code']}")
    if "event_types" in a and pair.case.stream:
        got = [e.type.value for e in run.events]
        p.expect(got == a["event_types"], f"stream: events {got}, want {a['event_types']}")


def retry_after_from_headers(headers: dict[str, str]) -> int | str | None:
    """What the vendor's headers say (``retry-after-ms``, else ``retry-after`` seconds; "date" for an HTTP date)."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        return int(float(raw_ms))
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return int(float(raw) * 1000)
    except ValueError:
        return "date"
