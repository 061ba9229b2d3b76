/**
 * The Metona sidecar client: spawns the sidecar, speaks newline-delimited JSON-RPC 2.0 over its stdio
 * (ARCHITECTURE §2), and keeps it alive. Node's standard library only.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { createInterface } from "node:readline";
import type { Writable } from "node:stream";

import {
  INVALID_REQUEST,
  SidecarError,
  TIMEOUT,
  cancelledError,
  exitedError,
  unavailableError,
} from "./errors.js";
import {
  TERMINAL_EVENTS,
  type ChatParams,
  type EventNotificationParams,
  type InitializeResult,
  type MetonaMethod,
  type MetonaParams,
  type MetonaResult,
  type MetonaStreamEvent,
  type SubscribeResult,
} from "./generated.js";
import { AsyncQueue } from "./queue.js";

/** How to start the sidecar: the binary, or `python -m sidecar` for development (see the helpers below). */
export interface SidecarCommand {
  command: string;
  args?: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/** The shipped binary (build/build.sh: `dist/metona/metona-sidecar`, one process; the app bundles `dist/metona/`). */
export function binaryCommand(path: string, args: string[] = []): SidecarCommand {
  return { command: path, args };
}

/** `python -m sidecar` from a source checkout (`cwd`), e.g. `python: "<repo>/.venv/bin/python"`. */
export function pythonCommand(options: { cwd: string; python?: string; args?: string[] }): SidecarCommand {
  return { command: options.python ?? "python3", args: ["-m", "sidecar", ...(options.args ?? [])], cwd: options.cwd };
}

export interface RestartPolicy {
  /** Restarts tried in a row (each a new process up to `initialize`) before the client gives up. */
  maxAttempts: number;
  /** The delay before restart n is `min(baseDelayMs * 2^(n-1), maxDelayMs)`. */
  baseDelayMs: number;
  maxDelayMs: number;
}

export interface MetonaClientOptions extends SidecarCommand {
  clientName?: string;
  clientVersion?: string;
  /** Every stderr line of the sidecar (its logs). Default: written to this process's stderr. */
  logger?: (line: string) => void;
  /** Restart the sidecar when it dies (default: on, 5 attempts from 250 ms to 8 s); `false`: never. */
  restart?: Partial<RestartPolicy> | false;
  /** The `initialize` handshake must answer within this (default 30 s), else the process is killed. */
  initializeTimeoutMs?: number;
  /** `dispose()`: how long `shutdown`, then the exit, may take before the process group is killed (default 3 s). */
  disposeGraceMs?: number;
}

export interface RequestOptions {
  /** Aborting sends `$/cancelRequest`; the promise then rejects with the sidecar's -32800 error. */
  signal?: AbortSignal;
}

export interface RestartInfo {
  attempt: number;
  delayMs: number;
  exitCode: number | null;
  signal: string | null;
}

/** Params are optional exactly when the method's params type has no required field. */
export type RequestArgs<M extends MetonaMethod> = {} extends MetonaParams<M>
  ? [params?: MetonaParams<M>, options?: RequestOptions]
  : [params: MetonaParams<M>, options?: RequestOptions];

/** The methods that answer MetonaStreamEvent lines before their result. */
export type StreamMethod = "chat/stream";

export interface StreamCall<M extends StreamMethod> {
  /** The MetonaStreamEvent lines of this call, in order; ends after `done`. */
  events: AsyncIterableIterator<MetonaStreamEvent>;
  result: Promise<MetonaResult<M>>;
}

export interface SubscribeOptions {
  /** Replay the events after this sequence (default 0: all of them). */
  afterSequence?: number;
}

const DEFAULT_RESTART: RestartPolicy = { maxAttempts: 5, baseDelayMs: 250, maxDelayMs: 8000 };
/** Until `initialize` reports the sidecar's own limit: the sidecar's default. */
const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024;
const TERMINAL = new Set<string>(TERMINAL_EVENTS);

interface Pending {
  resolve: (result: unknown) => void;
  reject: (error: SidecarError) => void;
  /** Runs synchronously when the result line is read, before any later line (subscriptions need that). */
  onResult?: (result: unknown) => void;
  detach?: () => void;
}

/** One `subscribe()` iterator; it outlives sidecar processes (resubscribed after a restart). */
interface Subscription {
  resourceId: string;
  last: number;
  subscriptionId: string | null;
  queue: AsyncQueue<EventNotificationParams>;
}

type State = "starting" | "ready" | "restarting" | "failed" | "disposed";

/**
 * Events: `ready` (InitializeResult, after every successful start), `restarting` (RestartInfo, before each
 * restart's delay), `failed` (SidecarError: restarts exhausted), `exit` ({exitCode, signal} of every process),
 * `notification` (method, params: every notification but `event`), `streamLine` (a MetonaStreamEvent no call is
 * waiting for, e.g. an agent run's model output).
 */
export class MetonaClient extends EventEmitter {
  private readonly options: MetonaClientOptions;
  private readonly restartPolicy: RestartPolicy | null;
  private readonly log: (line: string) => void;
  private proc: ChildProcess | null = null;
  /** The current process's stdin, owned by the client (see launch()). */
  private stdin: Writable | null = null;
  private state: State = "starting";
  private gate: Promise<void> = Promise.resolve();
  private openGate: () => void = () => {};
  private closeGate: (error: SidecarError) => void = () => {};
  private failure: SidecarError | null = null;
  private nextId = 0;
  private readonly pending = new Map<number, Pending>();
  private readonly streams = new Map<string, AsyncQueue<MetonaStreamEvent>>();
  private readonly subscriptions = new Set<Subscription>();
  private readonly bySubscriptionId = new Map<string, Subscription>();
  /** Events whose subscription id is not known yet: they can precede the `events/subscribe` answer. */
  private readonly early = new Map<string, EventNotificationParams[]>();
  private subscribing = 0;
  private partial: Buffer[] = [];
  private maxLineBytes = DEFAULT_MAX_LINE_BYTES;
  private initResult: InitializeResult | null = null;
  private restartTimer: NodeJS.Timeout | null = null;
  private disposing: Promise<void> | null = null;
  /** Kills the current process and fences it off (see kill()); null when no process runs. */
  private killCurrent: (() => void) | null = null;

  private constructor(options: MetonaClientOptions) {
    super();
    this.options = options;
    this.restartPolicy = options.restart === false ? null : { ...DEFAULT_RESTART, ...(options.restart ?? {}) };
    this.log = options.logger ?? ((line) => process.stderr.write(`[sidecar] ${line}\n`));
  }

  /** Spawn the sidecar and complete the `initialize` handshake; rejects (typed) when that fails. */
  static async start(options: MetonaClientOptions): Promise<MetonaClient> {
    const client = new MetonaClient(options);
    client.initResult = await client.launch();
    client.state = "ready";
    return client;
  }

  /** The `initialize` result of the current process. */
  get initialized(): InitializeResult {
    if (!this.initResult) throw unavailableError("not initialized");
    return this.initResult;
  }

  /** The pid of the process the client spawned: the sidecar (`initialize` answers the same pid). */
  get pid(): number | undefined {
    return this.proc?.pid;
  }

  /** A typed request; rejects with a `SidecarError` (the sidecar's, or the client's when the process is gone). */
  request<M extends MetonaMethod>(method: M, ...args: RequestArgs<M>): Promise<MetonaResult<M>> {
    return this.call(method, args[0], args[1]) as Promise<MetonaResult<M>>;
  }

  /** An untyped request, for methods outside the generated map (e.g. the `dev/*` methods of tests). */
  call(method: string, params?: unknown, options?: RequestOptions): Promise<unknown> {
    if (this.state === "ready") return this.send(method, params, options?.signal);
    if (this.state === "failed" || this.state === "disposed") return Promise.reject(this.unavailable());
    // restarting: sent once the new process is ready; an abort meanwhile rejects at once (and nothing is sent)
    const signal = options?.signal;
    const waiting = this.gate.then(() => this.send(method, params, signal));
    if (!signal) return waiting;
    return new Promise<unknown>((resolve, reject) => {
      const onAbort = (): void => reject(cancelledError());
      signal.addEventListener("abort", onAbort, { once: true });
      waiting.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    });
  }

  /** A notification to the sidecar; dropped when no process is running. */
  notify(method: string, params?: unknown): void {
    this.write(params === undefined ? { jsonrpc: "2.0", method } : { jsonrpc: "2.0", method, params });
  }

  /**
   * A streaming call: its MetonaStreamEvent lines (routed by the request's `meta.requestId`) and its result.
   * If the call fails, `events` throws the same error after the lines already received.
   */
  stream<M extends StreamMethod>(method: M, params: MetonaParams<M>, options?: RequestOptions): StreamCall<M> {
    const requestId = (params as ChatParams).request.meta.requestId;
    const events = this.streamLines(requestId);
    const result = this.call(method, params, options) as Promise<MetonaResult<M>>;
    result.then(
      () => this.endStream(requestId),
      (error: unknown) => this.endStream(requestId, error),
    );
    return { events, result };
  }

  /** The MetonaStreamEvent lines of one `requestId` (e.g. an agent run's iteration), until its `done`. */
  streamLines(requestId: string): AsyncIterableIterator<MetonaStreamEvent> {
    if (this.streams.has(requestId)) {
      throw new SidecarError(INVALID_REQUEST, "A stream with this requestId is already open", {
        code: "DUPLICATE_REQUEST_ID",
        details: { request_id: requestId },
      });
    }
    const queue = new AsyncQueue<MetonaStreamEvent>(() => this.streams.delete(requestId));
    this.streams.set(requestId, queue);
    return queue;
  }

  /**
   * A resource's events (`events/subscribe`): replay, then live, deduped by sequence, ending after the terminal
   * event. After a sidecar restart it resubscribes from the last sequence it delivered. `break` unsubscribes.
   */
  subscribe(resourceId: string, options: SubscribeOptions = {}): AsyncIterableIterator<EventNotificationParams> {
    const sub: Subscription = {
      resourceId,
      last: options.afterSequence ?? 0,
      subscriptionId: null,
      queue: new AsyncQueue<EventNotificationParams>(() => this.unsubscribe(sub)),
    };
    this.subscriptions.add(sub);
    if (this.state === "ready") this.startSubscription(sub);
    else if (this.state === "failed" || this.state === "disposed") this.endSubscription(sub, this.unavailable());
    // restarting: restart() starts it once the new process is ready
    return sub.queue;
  }

  /**
   * Kill the running sidecar now (its whole process group: the sidecar and its workers).
   * The process is gone for the client at once: its pending requests reject with SIDECAR_EXITED, nothing it still
   * writes is read, and requests made from here on go to the next process (restart policy) or reject with
   * SIDECAR_EXITED (no restart). E.g. the app's "restart the back end" for a sidecar that stopped answering.
   */
  kill(): void {
    this.killCurrent?.();
  }

  /** `shutdown` + `exit`, then the process group is killed if it is still there after the grace period. */
  dispose(): Promise<void> {
    this.disposing ??= this.shutdownAndExit();
    return this.disposing;
  }

  // -- process ---------------------------------------------------------------------------------------------

  private async launch(): Promise<InitializeResult> {
    const { command, args = [], cwd, env } = this.options;
    const proc = spawn(command, args, {
      cwd,
      env: env ?? process.env,
      stdio: ["pipe", "pipe", "pipe"],
      // its own process group: the sidecar's workers go with it on a kill
      detached: true,
    });
    const stdin = proc.stdin as Writable;
    this.proc = proc;
    this.stdin = stdin;
    this.partial = [];
    let reaped = false;
    const fenced = (): boolean => reaped; // a listener run by one line of a chunk may kill() the process
    this.maxLineBytes = DEFAULT_MAX_LINE_BYTES;
    stdin.on("error", () => {}); // EPIPE when it died: its exit is handled below
    proc.stdout?.on("data", (chunk: Buffer) => {
      if (!reaped) this.onStdout(chunk, fenced); // a killed process's last lines are not answers
    });
    if (proc.stderr) createInterface({ input: proc.stderr, crlfDelay: Infinity }).on("line", this.log);
    const onGone = (exitCode: number | null, signal: string | null): void => {
      if (reaped) return;
      reaped = true;
      this.onProcessGone(proc, exitCode, signal);
    };
    // The fence: once the client has decided this process is dead (it killed it, or saw it killed), nothing it
    // still writes is read, and what is pending rejects. The group kill comes first, so no member of the group
    // can answer a request written afterwards.
    this.killCurrent = () => {
      killGroup(proc);
      stdin.destroy();
      onGone(null, "SIGKILL");
    };
    proc.on("exit", (code: number | null, signal: NodeJS.Signals | null) => {
      killGroup(proc); // whatever is left of the group (its workers) goes too
      stdin.destroy();
      // killed: gone now; a normal exit waits for "close", so the answers it wrote before leaving are still read
      if (signal !== null) onGone(code, signal);
    });
    proc.on("close", (code: number | null, signal: NodeJS.Signals | null) => onGone(code, signal));
    proc.on("error", (error: Error) => {
      this.log(`spawn ${command}: ${error.message}`);
      if (proc.pid === undefined) {
        stdin.destroy();
        onGone(null, null);
      }
    });

    const timeoutMs = this.options.initializeTimeoutMs ?? 30_000;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      this.log(`no initialize answer within ${timeoutMs} ms; killing the sidecar`);
      killGroup(proc);
    }, timeoutMs);
    try {
      const result = (await this.send("initialize", {
        process_id: process.pid,
        client_info: { name: this.options.clientName ?? "metona-client", version: this.options.clientVersion },
      })) as InitializeResult;
      this.maxLineBytes = result.capabilities.limits.max_line_bytes;
      return result;
    } catch (error) {
      killGroup(proc); // a process that did not initialize is of no use
      if (!timedOut) throw error;
      throw new SidecarError(TIMEOUT, "The sidecar did not answer initialize in time", {
        code: "SIDECAR_START_TIMEOUT",
        details: { timeout_ms: timeoutMs },
      });
    } finally {
      clearTimeout(timer);
    }
  }

  private onProcessGone(proc: ChildProcess, exitCode: number | null, signal: string | null): void {
    this.emit("exit", { exitCode, signal });
    if (proc !== this.proc) return;
    this.proc = null;
    this.stdin = null;
    this.killCurrent = null;
    const error = exitedError(exitCode, signal);
    const pending = [...this.pending.values()];
    this.pending.clear();
    for (const p of pending) {
      p.detach?.();
      p.reject(error);
    }
    for (const queue of this.streams.values()) queue.end(error);
    this.streams.clear();
    this.bySubscriptionId.clear();
    this.early.clear();
    this.subscribing = 0;
    if (this.state !== "ready") return; // starting: launch() rejects; disposed: dispose() is waiting
    if (!this.restartPolicy) {
      this.fail(error);
      return;
    }
    this.state = "restarting";
    this.gate = new Promise<void>((resolve, reject) => {
      this.openGate = resolve;
      this.closeGate = reject;
    });
    this.gate.catch(() => {}); // callers see it through their own requests
    void this.restart(this.restartPolicy, exitCode, signal);
  }

  private async restart(policy: RestartPolicy, exitCode: number | null, signal: string | null): Promise<void> {
    let last = exitedError(exitCode, signal);
    for (let attempt = 1; attempt <= policy.maxAttempts; attempt++) {
      if (this.state !== "restarting") return; // disposed meanwhile
      const delayMs = Math.min(policy.baseDelayMs * 2 ** (attempt - 1), policy.maxDelayMs);
      this.emit("restarting", { attempt, delayMs, exitCode, signal } satisfies RestartInfo);
      await new Promise<void>((resolve) => {
        this.restartTimer = setTimeout(resolve, delayMs);
      });
      this.restartTimer = null;
      if (this.state !== "restarting") return; // disposed meanwhile
      try {
        const result = await this.launch();
        if (this.state !== "restarting") return;
        this.initResult = result;
        this.state = "ready";
        this.openGate();
        this.emit("ready", result);
        for (const sub of this.subscriptions) this.startSubscription(sub);
        return;
      } catch (error) {
        last = error as SidecarError;
        const details = last.data.details ?? {};
        exitCode = (details.exit_code as number | null | undefined) ?? null;
        signal = (details.signal as string | null | undefined) ?? null;
      }
    }
    if (this.state === "restarting") this.fail(unavailableError(`gave up after ${policy.maxAttempts} restarts`, last));
  }

  private fail(error: SidecarError): void {
    this.state = "failed";
    this.failure = error;
    this.closeGate(error);
    for (const sub of [...this.subscriptions]) this.endSubscription(sub, error);
    this.emit("failed", error);
  }

  private unavailable(): SidecarError {
    return this.failure ?? unavailableError(this.state === "disposed" ? "disposed" : this.state);
  }

  private async shutdownAndExit(): Promise<void> {
    const wasReady = this.state === "ready";
    this.state = "disposed";
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.closeGate(unavailableError("disposed"));
    for (const sub of [...this.subscriptions]) this.endSubscription(sub, unavailableError("disposed"));
    const proc = this.proc;
    const stdin = this.stdin;
    if (!proc) return;
    const grace = this.options.disposeGraceMs ?? 3000;
    const closed = new Promise<void>((resolve) => {
      if (proc.exitCode !== null || proc.signalCode !== null) resolve();
      proc.once("close", () => resolve());
    });
    const killer = setTimeout(() => killGroup(proc), grace);
    try {
      if (wasReady) {
        const acknowledged = this.send("shutdown", undefined).then(
          () => true,
          () => false,
        );
        if (await Promise.race([acknowledged, closed.then(() => false)])) this.notify("exit");
      }
      stdin?.end();
      await closed;
    } finally {
      clearTimeout(killer);
      killGroup(proc);
    }
  }

  // -- wire ------------------------------------------------------------------------------------------------

  private send(method: string, params: unknown, signal?: AbortSignal, onResult?: (r: unknown) => void): Promise<unknown> {
    if (signal?.aborted) return Promise.reject(cancelledError());
    const id = ++this.nextId;
    const message = params === undefined ? { jsonrpc: "2.0", id, method } : { jsonrpc: "2.0", id, method, params };
    const line = JSON.stringify(message);
    // a character is at most 3 UTF-8 bytes: only long lines are measured
    if (line.length * 3 >= this.maxLineBytes && Buffer.byteLength(line) >= this.maxLineBytes) {
      return Promise.reject(
        new SidecarError(INVALID_REQUEST, "Invalid Request: line exceeds the size limit", {
          code: "REQUEST_TOO_LARGE",
          details: { size_bytes: Buffer.byteLength(line) + 1, max_line_bytes: this.maxLineBytes },
        }),
      );
    }
    if (!this.proc) return Promise.reject(this.unavailable());
    return new Promise<unknown>((resolve, reject) => {
      const entry: Pending = { resolve, reject, onResult };
      if (signal) {
        const onAbort = (): void => this.notify("$/cancelRequest", { id });
        signal.addEventListener("abort", onAbort, { once: true });
        entry.detach = () => signal.removeEventListener("abort", onAbort);
      }
      this.pending.set(id, entry);
      this.writeLine(line);
    });
  }

  private write(message: unknown): void {
    this.writeLine(JSON.stringify(message));
  }

  /** EPIPE-safe: a process that is gone (or going) is never written to; its exit rejects what is pending. */
  private writeLine(line: string): void {
    const stdin = this.stdin;
    if (!stdin || stdin.destroyed || !stdin.writable) return;
    stdin.write(line + "\n");
  }

  private onStdout(chunk: Buffer, fenced: () => boolean): void {
    let start = 0;
    for (;;) {
      if (fenced()) return;
      const nl = chunk.indexOf(10, start);
      if (nl < 0) {
        if (start < chunk.length) this.partial.push(chunk.subarray(start));
        return;
      }
      let line = chunk.subarray(start, nl);
      if (this.partial.length) {
        this.partial.push(line);
        line = Buffer.concat(this.partial);
        this.partial = [];
      }
      start = nl + 1;
      this.onLine(line);
    }
  }

  private onLine(raw: Buffer): void {
    let msg: Record<string, unknown>;
    try {
      msg = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
    } catch {
      this.log(`unreadable stdout line (${raw.length} bytes) ignored`);
      return;
    }
    if (msg === null || typeof msg !== "object" || Array.isArray(msg)) return; // the client sends no batches
    if (msg.jsonrpc === undefined) {
      this.onStreamLine(msg as unknown as MetonaStreamEvent);
    } else if (typeof msg.method === "string") {
      if (msg.method === "event") this.onEvent(msg.params as EventNotificationParams);
      else this.emit("notification", msg.method, msg.params);
    } else {
      this.onResponse(msg);
    }
  }

  private onResponse(msg: Record<string, unknown>): void {
    const entry = this.pending.get(msg.id as number);
    if (!entry) {
      if (msg.error !== undefined) this.log(`error without a pending request: ${JSON.stringify(msg.error)}`);
      return;
    }
    this.pending.delete(msg.id as number);
    entry.detach?.();
    if (msg.error !== undefined) {
      entry.reject(SidecarError.fromWire(msg.error));
    } else {
      entry.onResult?.(msg.result);
      entry.resolve(msg.result);
    }
  }

  private onStreamLine(line: MetonaStreamEvent): void {
    const queue = this.streams.get(line.requestId);
    if (!queue) {
      this.emit("streamLine", line);
      return;
    }
    queue.push(line);
    if (line.type === "done") {
      queue.end();
      this.streams.delete(line.requestId);
    }
  }

  private endStream(requestId: string, error?: unknown): void {
    const queue = this.streams.get(requestId);
    if (!queue) return;
    this.streams.delete(requestId);
    queue.end(error);
  }

  // -- resource events -------------------------------------------------------------------------------------

  private startSubscription(sub: Subscription): void {
    sub.subscriptionId = null;
    this.subscribing++;
    const params = { resource_id: sub.resourceId, after_sequence: sub.last };
    this.send("events/subscribe", params, undefined, (result) => {
      const id = (result as SubscribeResult).subscription_id;
      if (sub.queue.done) return; // stopped meanwhile: unsubscribe() sends the unsubscribe
      sub.subscriptionId = id;
      this.bySubscriptionId.set(id, sub);
      for (const event of this.early.get(id) ?? []) this.deliver(sub, event);
      this.early.delete(id);
    }).then(
      () => this.subscribed(),
      (error: SidecarError) => {
        this.subscribed();
        // a process that died answers nothing: the restart resubscribes (or fail() ends it)
        if (error.data.code !== "SIDECAR_EXITED" || !this.restartPolicy) this.endSubscription(sub, error);
        else if (sub.queue.done) this.unsubscribe(sub);
      },
    );
  }

  private subscribed(): void {
    if (this.subscribing > 0) this.subscribing--;
    if (this.subscribing === 0) this.early.clear();
  }

  private onEvent(params: EventNotificationParams): void {
    const sub = this.bySubscriptionId.get(params.subscription_id);
    if (sub) {
      this.deliver(sub, params);
    } else if (this.subscribing > 0) {
      const list = this.early.get(params.subscription_id);
      if (list) list.push(params);
      else this.early.set(params.subscription_id, [params]);
    }
  }

  private deliver(sub: Subscription, event: EventNotificationParams): void {
    if (event.id <= sub.last) return; // a duplicate (the replay/live seam, or a replay after a restart)
    sub.last = event.id;
    sub.queue.push(event);
    if (TERMINAL.has(event.event)) this.endSubscription(sub);
  }

  private endSubscription(sub: Subscription, error?: unknown): void {
    this.subscriptions.delete(sub);
    if (sub.subscriptionId) this.bySubscriptionId.delete(sub.subscriptionId);
    sub.queue.end(error);
  }

  private unsubscribe(sub: Subscription): void {
    const id = sub.subscriptionId;
    this.endSubscription(sub);
    if (id && this.state === "ready") {
      this.send("events/unsubscribe", { subscription_id: id }).catch(() => {}); // already ended: nothing to do
    }
  }
}

function killGroup(proc: ChildProcess): void {
  if (proc.pid === undefined) return;
  try {
    process.kill(-proc.pid, "SIGKILL");
  } catch {
    // the group is gone already
  }
}
