/**
 * The client against the real sidecar (`.venv/bin/python -m sidecar`, or the binary when SIDECAR_CMD is set).
 * No sleeps: every wait is on a message, an event of the client or a process exit.
 */
import assert from "node:assert/strict";
import { once } from "node:events";
import { join } from "node:path";
import { test } from "node:test";

import {
  MetonaClient,
  SidecarError,
  type EventNotificationParams,
  type MetonaStreamEvent,
  type RestartInfo,
} from "../src/index.js";
import { FAKE_SIDECAR, exists, flakySidecar, irRequest, nextValue, sandbox, sidecarCommand, startClient } from "./helpers.js";

const noLog = (): void => {};
/** Every test is bounded: a hang fails it instead of the run (a start of the binary takes ~1 s, a restart as much). */
const LIMIT_MS = 120_000;

function assertSidecarError(error: unknown, code: number, projectCode: string): SidecarError {
  assert.ok(error instanceof SidecarError, `not a SidecarError: ${String(error)}`);
  assert.equal(error.code, code, error.message);
  assert.equal(error.data.code, projectCode);
  return error;
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of it) out.push(v);
  return out;
}

/** Every event of one subscription: sequences unique and rising, exactly one terminal event, last. */
function assertCleanSequence(events: EventNotificationParams[], terminal: string): void {
  const seqs = events.map((e) => e.id);
  assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b), `duplicates or out of order: ${seqs}`);
  assert.equal(events.at(-1)?.event, terminal);
  for (const e of events) assert.equal(e.id, e.data.sequence);
}

test("initialize handshake, typed requests, a typed error", { timeout: LIMIT_MS }, async (t) => {
  const { client } = await startClient(t);
  const init = client.initialized;
  assert.equal(typeof init.server_info.version, "string");
  assert.ok(init.capabilities.limits.max_line_bytes >= 1024);
  assert.equal(init.pid > 0, true);

  assert.deepEqual(await client.request("ping"), {});
  const created = await client.request("providers/create", { preset: "mock", provider_id: "m1" });
  assert.equal(created.provider_id, "m1");
  const got = await client.request("providers/get", { provider_id: "m1" });
  assert.equal(got.preset, "mock");

  const missing = await client.request("notes/get", { note_id: "note_missing" }).catch((e: unknown) => e);
  const error = assertSidecarError(missing, 404, "NOTE_NOT_FOUND");
  assert.equal(error.projectCode, "NOTE_NOT_FOUND");
  const invalid = await client.call("notes/get", {}).catch((e: unknown) => e);
  assertSidecarError(invalid, -32602, "VALIDATION_ERROR");
  const unknown = await client.call("no/such/method").catch((e: unknown) => e);
  assertSidecarError(unknown, -32601, "METHOD_NOT_FOUND");
});

test("a stream: MetonaStreamEvent lines routed by requestId, then the result", { timeout: LIMIT_MS }, async (t) => {
  const { client } = await startClient(t);
  const script = { turns: [{ reasoning: "hmm", text: "你好！Hello.", chunk_chars: 2 }] };
  await client.request("providers/create", { preset: "mock", options: { script } });
  const a = client.stream("chat/stream", { provider_id: "mock", request: irRequest("hi", "req_a") });
  const b = client.stream("chat/stream", { provider_id: "mock", request: irRequest("hi", "req_b") });
  const [linesA, linesB] = await Promise.all([collect(a.events), collect(b.events)]);
  for (const [lines, rid] of [
    [linesA, "req_a"],
    [linesB, "req_b"],
  ] as [MetonaStreamEvent[], string][]) {
    assert.deepEqual(
      lines.map((l) => l.seq),
      lines.map((_, i) => i),
    );
    assert.ok(lines.every((l) => l.requestId === rid));
    assert.equal(lines[0]?.type, "thinking_start");
    assert.equal(lines.at(-1)?.type, "done");
    const text = lines.filter((l) => l.type === "text_delta").map((l) => l.delta).join("");
    assert.equal(text, "你好！Hello.");
  }
  const result = await a.result;
  assert.equal(result.content, "你好！Hello.");
  assert.equal((await b.result).meta.provider, "mock");
});

test("AbortSignal sends $/cancelRequest; the call rejects with the -32800 error", { timeout: LIMIT_MS }, async (t) => {
  const { client } = await startClient(t);
  const script = { turns: [{ text: "x".repeat(2000), chunk_chars: 1, delay_ms: 2 }] };
  await client.request("providers/create", { preset: "mock", options: { script } });
  const controller = new AbortController();
  const call = client.stream(
    "chat/stream",
    { provider_id: "mock", request: irRequest("go", "req_cancel") },
    { signal: controller.signal },
  );
  const seen: MetonaStreamEvent[] = [];
  const rejected = call.result.catch((e: unknown) => e);
  for (let i = 0; i < 5; i++) seen.push(await nextValue(call.events));
  controller.abort();
  seen.push(...(await collect(call.events)));
  assertSidecarError(await rejected, -32800, "REQUEST_CANCELLED");
  assert.deepEqual(
    seen.slice(-2).map((l) => l.type),
    ["error", "done"],
  );
  assert.equal(seen.at(-2)?.error?.code, "user_aborted");

  // aborted before it is sent: rejected at once, nothing reaches the sidecar
  const early = await client.request("ping", {}, { signal: AbortSignal.abort() }).catch((e: unknown) => e);
  assertSidecarError(early, -32800, "REQUEST_CANCELLED");
  assert.deepEqual(await client.request("ping"), {});
});

test("events/subscribe: replay then live until the terminal event", { timeout: LIMIT_MS }, async (t) => {
  const { client } = await startClient(t);
  const job = await client.request("exports/create", {
    source: { type: "markdown", markdown: "# Title\n\nSome *text*.", title: "t" },
    format: "html",
  });
  const events = await collect(client.subscribe(job.job_id));
  assert.equal(events[0]?.event, "Queued");
  assertCleanSequence(events, "Completed");
  // a second iterator from a sequence replays only the rest
  const cut = events[1]?.id as number;
  const rest = await collect(client.subscribe(job.job_id, { afterSequence: cut }));
  assert.deepEqual(
    rest.map((e) => e.id),
    events.filter((e) => e.id > cut).map((e) => e.id),
  );
});

test("after the sidecar is killed, the client restarts it and the subscription resumes from its last sequence", { timeout: LIMIT_MS }, async (t) => {
  const { client } = await startClient(t, { restart: { baseDelayMs: 10 } });
  const restarts: RestartInfo[] = [];
  client.on("restarting", (info: RestartInfo) => restarts.push(info));
  const job = (await client.call("dev/jobs/create", { steps: 100_000, step_ms: 10 })) as { job_id: string };
  const it = client.subscribe(job.job_id);
  const events = [await nextValue(it), await nextValue(it), await nextValue(it)];
  const first = client.pid as number;
  const ready = once(client, "ready");
  process.kill(first, "SIGKILL");
  events.push(...(await collect(it)));
  await ready;
  assert.notEqual(client.pid, first);
  assert.equal(exists(first), false);
  assert.deepEqual(
    restarts.map((r) => [r.attempt, r.signal]),
    [[1, "SIGKILL"]],
  );
  assertCleanSequence(events, "Failed");
  const failed = events.at(-1)?.data.data as { error: { code: string } };
  assert.equal(failed.error.code, "JOB_INTERRUPTED");
  assert.deepEqual(await client.request("ping"), {});
});

test("restart back-off: delays double while starts fail, then a start succeeds", { timeout: LIMIT_MS }, async (t) => {
  // starts 0 and 3 are the sidecar; starts 1 and 2 die before initialize
  const { client } = await startClient(t, {
    ...flakySidecar(t, "1|2"),
    restart: { baseDelayMs: 5, maxDelayMs: 15, maxAttempts: 5 },
  });
  const restarts: RestartInfo[] = [];
  client.on("restarting", (info: RestartInfo) => restarts.push(info));
  const ready = once(client, "ready");
  const restarting = once(client, "restarting");
  process.kill(client.pid as number, "SIGKILL");
  await restarting;
  // made while it restarts: sent once it is ready; aborted meanwhile: rejected at once, never sent
  const queued = client.request("ping");
  const controller = new AbortController();
  const aborted = client.request("ping", {}, { signal: controller.signal }).catch((e: unknown) => e);
  controller.abort();
  assertSidecarError(await aborted, -32800, "REQUEST_CANCELLED");
  await ready;
  assert.deepEqual(await queued, {});
  assert.deepEqual(
    restarts.map((r) => [r.attempt, r.delayMs, r.exitCode]),
    [
      [1, 5, null],
      [2, 10, 3],
      [3, 15, 3],
    ],
  );
  assert.deepEqual(await client.request("ping"), {});
});

test("restarts exhausted: the client fails, requests and subscriptions reject typed", { timeout: LIMIT_MS }, async (t) => {
  const { client } = await startClient(t, {
    ...flakySidecar(t, "[1-9]*"),
    restart: { baseDelayMs: 1, maxAttempts: 2 },
  });
  const job = (await client.call("dev/jobs/create", { steps: 100_000, step_ms: 10 })) as { job_id: string };
  const it = client.subscribe(job.job_id);
  await nextValue(it);
  const failed = once(client, "failed");
  process.kill(client.pid as number, "SIGKILL");
  const [error] = (await failed) as [SidecarError];
  assertSidecarError(error, 503, "SIDECAR_UNAVAILABLE");
  assertSidecarError(await collect(it).catch((e: unknown) => e), 503, "SIDECAR_UNAVAILABLE");
  assertSidecarError(await client.request("ping").catch((e: unknown) => e), 503, "SIDECAR_UNAVAILABLE");
});

test("pending requests reject when the process dies; no EPIPE escapes", { timeout: LIMIT_MS }, async (t) => {
  const { client } = await startClient(t, { restart: false });
  const script = { turns: [{ text: "y".repeat(2000), chunk_chars: 1, delay_ms: 2 }] };
  await client.request("providers/create", { preset: "mock", options: { script } });
  const call = client.stream("chat/stream", { provider_id: "mock", request: irRequest("go", "req_dies") });
  const pending = call.result.catch((e: unknown) => e);
  await nextValue(call.events);
  const exited = once(client, "exit");
  // the sidecar dies: its whole group (the sidecar and its workers), so nothing of it can answer a request written
  // after this line
  process.kill(-(client.pid as number), "SIGKILL");
  // written while the process is dying: must reject, not hang or throw EPIPE
  const late = client.request("ping").catch((e: unknown) => e);
  client.notify("$/cancelRequest", { id: 1 });
  const error = assertSidecarError(await pending, 503, "SIDECAR_EXITED");
  assert.equal(error.data.details?.signal, "SIGKILL");
  assertSidecarError(await late, 503, "SIDECAR_EXITED");
  assertSidecarError(await collect(call.events).catch((e: unknown) => e), 503, "SIDECAR_EXITED");
  await exited;
  assertSidecarError(await client.request("ping").catch((e: unknown) => e), 503, "SIDECAR_EXITED");
});

test("kill(): the process is fenced off at once, its group is gone, the next process serves", { timeout: LIMIT_MS }, async (t) => {
  const { env } = sandbox(t);
  const client = await MetonaClient.start({ ...sidecarCommand(), env, logger: noLog, restart: { baseDelayMs: 1 } });
  t.after(() => client.dispose());
  assert.equal(client.initialized.pid, client.pid, "one process: the spawned one is the sidecar");
  const script = { turns: [{ text: "z".repeat(2000), chunk_chars: 1, delay_ms: 2 }] };
  await client.request("providers/create", { preset: "mock", options: { script } });
  const call = client.stream("chat/stream", { provider_id: "mock", request: irRequest("go", "req_killed") });
  const pending = call.result.catch((e: unknown) => e);
  await nextValue(call.events);
  const first = client.pid as number;
  const exits: { exitCode: number | null; signal: string | null }[] = [];
  client.on("exit", (info: { exitCode: number | null; signal: string | null }) => exits.push(info));
  const ready = once(client, "ready");
  const pingBefore = client.request("ping").catch((e: unknown) => e); // written before the kill, not yet answered
  client.kill();
  // synchronous: the process is gone for the client before any of its lines can be read again
  assert.deepEqual(exits, [{ exitCode: null, signal: "SIGKILL" }]);
  assert.equal(client.pid, undefined);
  const late = client.request("ping"); // made after the kill: waits for the next process
  assertSidecarError(await pingBefore, 503, "SIDECAR_EXITED");
  const error = assertSidecarError(await pending, 503, "SIDECAR_EXITED");
  assert.equal(error.data.details?.signal, "SIGKILL");
  assertSidecarError(await collect(call.events).catch((e: unknown) => e), 503, "SIDECAR_EXITED");
  await ready;
  assert.deepEqual(await late, {});
  assert.notEqual(client.pid, first);
  // the old group (the sidecar may be a zombie for a moment) is reaped soon
  const deadline = Date.now() + 5_000;
  while (exists(-first) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(exists(-first), false, "a process of the killed group is left");
  assert.equal(exits.length, 1, "the killed process's own exit is not reported twice");
});

test("kill() without restarts: requests made afterwards reject with SIDECAR_EXITED", { timeout: LIMIT_MS }, async (t) => {
  const { client } = await startClient(t, { restart: false });
  client.kill();
  assertSidecarError(await client.request("ping").catch((e: unknown) => e), 503, "SIDECAR_EXITED");
  client.kill(); // nothing left to kill: a no-op
});

test("lines up to the sidecar's max_line_bytes; a longer one is refused before it is sent", { timeout: LIMIT_MS }, async (t) => {
  const { env } = sandbox(t);
  const client = await MetonaClient.start({ ...sidecarCommand(["--max-line-bytes", "65536"]), env, logger: noLog });
  t.after(() => client.dispose());
  assert.equal(client.initialized.capabilities.limits.max_line_bytes, 65536);
  const script = (n: number) => ({ turns: [{ text: "é".repeat(n) }] }); // 2 UTF-8 bytes each
  const ok = await client.request("providers/create", { preset: "mock", options: { script: script(32_000) } });
  assert.equal(ok.provider_id, "mock");
  const big = client.request("providers/create", { preset: "mock", options: { script: script(33_000) } });
  assertSidecarError(await big.catch((e: unknown) => e), -32600, "REQUEST_TOO_LARGE");
  assert.deepEqual(await client.request("ping"), {});
});

test("long lines both ways: a 540 KB request and answer, split across pipe reads and UTF-8 sequences", { timeout: LIMIT_MS }, async (t) => {
  const { client } = await startClient(t);
  const text = "é€😀".repeat(60_000); // 2-, 3- and 4-byte UTF-8 sequences: 540 KB
  await client.request("providers/create", { preset: "mock", provider_id: "big", options: { script: { turns: [{ text }] } } });
  const request = { ...irRequest("x", "req_big"), params: { stream: false } };
  const answer = await client.request("chat/send", { provider_id: "big", request });
  assert.equal(answer.content, text);
});

test("dispose: shutdown + exit, no process left", { timeout: LIMIT_MS }, async (t) => {
  const { env } = sandbox(t);
  const client = await MetonaClient.start({ ...sidecarCommand(), env, logger: noLog });
  const pid = client.pid as number;
  // its services are up (a shutdown during start-up first waits for them: 2-3 s for the binary on a loaded machine)
  await client.request("notes/list", {});
  const exit = once(client, "exit");
  await client.dispose();
  const [{ exitCode }] = (await exit) as [{ exitCode: number | null }];
  assert.equal(exitCode, 0);
  assert.equal(exists(pid), false);
  assert.equal(exists(-pid), false, "a process of its group is left");
  assertSidecarError(await client.request("ping").catch((e: unknown) => e), 503, "SIDECAR_UNAVAILABLE");
});

test("dispose of a sidecar that does not answer: killed after the grace period", { timeout: LIMIT_MS }, async (t) => {
  const { env } = sandbox(t);
  const client = await MetonaClient.start({ ...sidecarCommand(), env, logger: noLog, disposeGraceMs: 200 });
  const pid = client.pid as number;
  const exit = once(client, "exit");
  process.kill(pid, "SIGSTOP");
  await client.dispose();
  const [{ signal }] = (await exit) as [{ signal: string | null }];
  assert.equal(signal, "SIGKILL");
  // the group's last member is reaped soon
  const deadline = Date.now() + 5_000;
  while (exists(-pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(exists(-pid), false);
});

test("fake sidecar: events before the subscribe answer, a seam duplicate and a stale replay are deduped", { timeout: LIMIT_MS }, async (t) => {
  const logs: string[] = [];
  const client = await MetonaClient.start({ command: process.execPath, args: [FAKE_SIDECAR], logger: (l) => logs.push(l) });
  t.after(() => client.dispose());
  const events = await collect(client.subscribe("job_fake"));
  assert.deepEqual(
    events.map((e) => [e.id, e.event]),
    [
      [1, "Queued"],
      [2, "Progress"],
      [3, "Progress"],
      [4, "Completed"],
    ],
  );
  assert.deepEqual(logs, ["fake sidecar ready"]);
  const tooLong = await client.request("notes/get", { note_id: "n".repeat(5000) }).catch((e: unknown) => e);
  assertSidecarError(tooLong, -32600, "REQUEST_TOO_LARGE");
  assert.deepEqual(await client.request("ping").catch((e: unknown) => (e as SidecarError).data.code), "METHOD_NOT_FOUND");
});

test("fake sidecar: after a restart the subscription asks for what follows the last sequence it delivered", { timeout: LIMIT_MS }, async (t) => {
  const client = await MetonaClient.start({
    command: process.execPath,
    args: [FAKE_SIDECAR, "live"],
    logger: noLog,
    restart: { baseDelayMs: 1 },
  });
  t.after(() => client.dispose());
  const it = client.subscribe("job_fake");
  const seen = [await nextValue(it), await nextValue(it)];
  const ready = once(client, "ready");
  process.kill(client.pid as number, "SIGKILL");
  await ready;
  seen.push(await nextValue(it), await nextValue(it));
  await it.return?.();
  assert.deepEqual(
    seen.map((e) => [e.id, e.data.data?.after_sequence]),
    [
      [1, 0],
      [2, 0],
      [3, 2],
      [4, 2],
    ],
  );
});

test("start fails typed when the command does not run", { timeout: LIMIT_MS }, async (t) => {
  const { dir } = sandbox(t);
  const error = await MetonaClient.start({ command: join(dir, "missing"), logger: noLog }).catch((e: unknown) => e);
  assertSidecarError(error, 503, "SIDECAR_EXITED");
});
