#!/usr/bin/env node
// The Electron-shaped smoke test (issue 19): the app's view of the sidecar, end to end, then a SIGKILLed app.
//
//   node scripts/smoke_app.mjs                              # .venv/bin/python -m sidecar (a source checkout)
//   node scripts/smoke_app.mjs --sidecar dist/metona/metona-sidecar  # the shipped binary (or SMOKE_SIDECAR_CMD)
//
// An "app" process (this script with --app, a Node parent like Electron's main process) is started with a bare
// desktop environment: PATH=/usr/bin:/bin, an empty HOME, TMPDIR on tmpfs (/dev/shm) when there is one, plus the
// METONA_* variables of this environment (e.g. METONA_LOCAL_MODEL_DIR for a source checkout). Through the
// TypeScript client it spawns the sidecar and requires every component `initialize` reports to be available (an
// unavailable one FAILS the run: the shipped app does everything), then transcribes a short espeak-ng speech file,
// gets a local-model answer, installs an MCP plugin (tools/mcp-ref's server-everything, handed over the way the
// host does: a package folder under plugins/.incoming), and exports a PDF. Then this script SIGKILLs the app and
// checks that every process under it (the sidecar — one process, the one the client spawned, binary or venv —,
// its workers, Chromium, the MCP server, the child guard) and every member of their process groups is gone within 3 s.
// Exit 0: passed; 1: failed (the reason on stderr). The client must be built (bash scripts/setup).
// --partial (a development aid, e.g. for a binary without its engines): the steps whose component is unavailable
// are left out and the rest, the SIGKILL check included, still runs; the run FAILS all the same, naming them.
import { spawn, spawnSync } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const SELF = fileURLToPath(import.meta.url);
const BUDGET_MS = 3000;
const EVERYTHING = join(ROOT, "tools/mcp-ref/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const SPEECH = "The quick brown fox jumps over the lazy dog.";

const { values: opts } = parseArgs({
  options: {
    app: { type: "boolean", default: false },
    sidecar: { type: "string" },
    audio: { type: "string" },
    partial: { type: "boolean", default: false },
    log: { type: "string" },
  },
});

if (opts.app) await runApp();
else process.exitCode = await orchestrate();

// -- the test: bare environment, app process, SIGKILL, the process check ----------------------------------------

async function orchestrate() {
  const sidecar = opts.sidecar ?? process.env.SMOKE_SIDECAR_CMD ?? "";
  const home = mkdtempSync(join(tmpdir(), "metona-smoke-home-"));
  const tmp = mkdtempSync(join(tmpfs() ?? tmpdir(), "metona-smoke-tmp-"));
  const work = mkdtempSync(join(tmpdir(), "metona-smoke-work-"));
  let app = null;
  let groups = new Set();
  try {
    const audio = join(work, "speech.wav");
    const espeak = spawnSync("espeak-ng", ["-v", "en-us", "-s", "150", "-w", audio, SPEECH], { encoding: "utf8" });
    if (espeak.status !== 0) return fail(`espeak-ng could not make the speech file: ${espeak.error ?? espeak.stderr}`);

    const env = { PATH: "/usr/bin:/bin", HOME: home, TMPDIR: tmp, LANG: "C.UTF-8" };
    for (const [k, v] of Object.entries(process.env)) if (k.startsWith("METONA_")) env[k] = v;
    const log = join(work, "sidecar.log");
    const args = [SELF, "--app", "--audio", audio, "--log", log, ...(sidecar ? ["--sidecar", sidecar] : [])];
    if (opts.partial) args.push("--partial");
    console.error(`[smoke] sidecar: ${sidecar || "python -m sidecar (.venv)"}; HOME=${home} TMPDIR=${tmp}`);
    app = spawn(process.execPath, args, { cwd: home, env, stdio: ["ignore", "pipe", "inherit"] });
    const report = await appReport(app);
    if (!report.ok) return fail(`the app failed: ${report.error}\n${logTail(log)}`);

    const tree = descendants(app.pid);
    groups = new Set(tree.map((p) => p.pgid).filter((g) => g !== pgidOf(app.pid)));
    const kinds = classify(tree, report);
    console.error(`[smoke] processes under the app: ${tree.length} in ${groups.size} groups: ${JSON.stringify(kinds)}`);
    const expected = { transcribe: "transcription worker", local: "local model worker", plugin: "mcp server", pdf: "chromium" };
    const missing = ["sidecar", ...report.ran.map((step) => expected[step])].filter((k) => !kinds[k]);
    if (missing.length) return fail(`expected processes not found under the app: ${missing.join(", ")}: ${describe(tree)}`);

    const killedAt = performance.now();
    process.kill(app.pid, "SIGKILL");
    const goneAt = new Map();
    const left = await waitGone(tree, groups, home, BUDGET_MS + 2000, (pid) => goneAt.set(pid, performance.now()));
    const tookMs = performance.now() - killedAt;
    const when = Object.entries(kinds).map(([k, pids]) => `${k} ${Math.round(Math.max(...pids.map((p) => goneAt.get(p) ?? Infinity)) - killedAt)} ms`);
    console.error(`[smoke] after the app's SIGKILL, the last of each went at: ${when.join(", ")}`);
    if (left.length) return fail(`left ${Math.round(tookMs)} ms after the app's SIGKILL: ${describe(left)}\n${logTail(log)}`);
    if (tookMs > BUDGET_MS) {
      return fail(`the last process went ${Math.round(tookMs)} ms after the app's SIGKILL\n${logTail(log)}`);
    }
    console.error(`[smoke] the app's SIGKILL left no process (all gone in ${Math.round(tookMs)} ms)`);
    if (report.unavailable.length) return fail(`initialize reports unavailable: ${report.unavailable.join("; ")}`);
    console.error("[smoke] PASSED");
    return 0;
  } finally {
    if (app && app.exitCode === null && app.signalCode === null) app.kill("SIGKILL");
    for (const g of groups) killQuietly(-g); // a failed run leaves nothing behind either
    for (const dir of [home, tmp, work]) rmSync(dir, { recursive: true, force: true });
  }
}

/** The app's last stdout line (JSON): {ok: true, ...pids} once everything worked, or {ok: false, error}. */
function appReport(app) {
  return new Promise((resolveReport) => {
    const lines = createInterface({ input: app.stdout });
    lines.on("line", (line) => {
      const msg = JSON.parse(line);
      if (msg.step) console.error(`[smoke] ${msg.step} (${msg.ms} ms)`);
      else resolveReport(msg);
    });
    app.on("exit", (code, signal) => resolveReport({ ok: false, error: `the app exited (${code ?? signal})` }));
  });
}

/** The sidecar's last log lines (its stderr, which the app's logger appends to a file). */
function logTail(path) {
  try {
    return `  sidecar log tail:\n  ${readFileSync(path, "utf8").trimEnd().split("\n").slice(-25).join("\n  ")}`;
  } catch {
    return "  (no sidecar log)";
  }
}

function fail(message) {
  console.error(`[smoke] FAILED: ${message}`);
  return 1;
}

function tmpfs() {
  try {
    const mounts = readFileSync("/proc/mounts", "utf8").split("\n").map((l) => l.split(" "));
    return mounts.some(([, dir, type]) => dir === "/dev/shm" && type === "tmpfs") ? "/dev/shm" : null;
  } catch {
    return null;
  }
}

// -- processes (Linux /proc) ------------------------------------------------------------------------------------

/** Every live process: {pid, ppid, pgid, state, cmd}. */
function processes() {
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const [state, ppid, pgid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").join(" ").trim();
      out.push({ pid: Number(name), ppid: Number(ppid), pgid: Number(pgid), state, cmd });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

function descendants(root) {
  const all = processes();
  const found = [];
  let frontier = [root];
  while (frontier.length) {
    const next = all.filter((p) => frontier.includes(p.ppid));
    found.push(...next);
    frontier = next.map((p) => p.pid);
  }
  return found;
}

function pgidOf(pid) {
  return processes().find((p) => p.pid === pid)?.pgid;
}

function classify(tree, report) {
  const kinds = {};
  const add = (kind, p) => (kinds[kind] ??= []).push(p.pid);
  for (const p of tree) {
    if (p.pid === report.sidecarPid) add("sidecar", p);
    else if (p.pid === report.mcpPid || p.cmd.includes("server-everything")) add("mcp server", p);
    else if (/media.?worker|transcri/i.test(p.cmd)) add("transcription worker", p);
    else if (/localmodel|local.?model/i.test(p.cmd)) add("local model worker", p);
    else if (/chrom(e|ium)/i.test(p.cmd)) add("chromium", p);
    else add("other", p);
  }
  return kinds;
}

/** Live (not zombie) processes: the snapshot's, their groups' members, and any whose HOME is the smoke's. */
function leftovers(tree, groups, home) {
  const snapshot = new Set(tree.map((p) => p.pid));
  return processes().filter((p) => {
    if (p.state === "Z") return false;
    if (snapshot.has(p.pid) || groups.has(p.pgid)) return true;
    try {
      return readFileSync(`/proc/${p.pid}/environ`, "utf8").split("\0").includes(`HOME=${home}`);
    } catch {
      return false;
    }
  });
}

async function waitGone(tree, groups, home, limitMs, onGone) {
  const deadline = performance.now() + limitMs;
  const waiting = new Set(tree.map((p) => p.pid));
  for (;;) {
    const left = leftovers(tree, groups, home);
    const live = new Set(left.map((p) => p.pid));
    for (const pid of waiting) if (!live.has(pid)) waiting.delete(pid) && onGone(pid);
    if (!left.length || performance.now() > deadline) return left;
    await new Promise((r) => setTimeout(r, 25)); // polling for the kernel's view; the budget is asserted by the caller
  }
}

function describe(procs) {
  return procs.map((p) => `${p.pid} [pgid ${p.pgid}] ${p.cmd.slice(0, 100)}`).join("; ");
}

function killQuietly(target) {
  try {
    process.kill(target, "SIGKILL");
  } catch {
    // already gone
  }
}

// -- the app: what an Electron main process does with the client -------------------------------------------------

async function runApp() {
  const emit = (msg) => process.stdout.write(JSON.stringify(msg) + "\n");
  let client = null;
  try {
    const { MetonaClient, binaryCommand, pythonCommand } = await import(
      join(ROOT, "ipc_schema/client/dist/src/index.js")
    ).catch(() => {
      throw new Error("ipc_schema/client/dist is missing: run `bash scripts/setup`");
    });
    const command = opts.sidecar
      ? binaryCommand(resolve(ROOT, opts.sidecar.split(/\s+/)[0]), opts.sidecar.split(/\s+/).slice(1))
      : pythonCommand({ cwd: ROOT, python: join(ROOT, ".venv/bin/python") });
    const step = async (name, fn) => {
      const t0 = performance.now();
      const out = await fn();
      emit({ step: name, ms: Math.round(performance.now() - t0) });
      return out;
    };
    client = await step("spawn -> initialize", () =>
      MetonaClient.start({
        ...command,
        env: process.env,
        clientName: "metona-smoke",
        restart: false,
        logger: (line) => opts.log && appendFileSync(opts.log, `${line}\n`),
      }),
    );
    const init = client.initialized;
    if (init.pid !== client.pid) {
      throw new Error(`the spawned process ${client.pid} is not the sidecar (initialize: pid ${init.pid})`);
    }
    const unavailable = Object.entries(init.capabilities.components)
      .filter(([, c]) => !c.available)
      .map(([name, c]) => `${name} (${c.detail ?? "unavailable"})`);
    if (unavailable.length && !opts.partial) throw new Error(`initialize reports unavailable: ${unavailable.join("; ")}`);
    const has = (...names) => names.every((n) => init.capabilities.components[n]?.available);
    const ran = [];

    if (has("transcription")) {
      const transcript = await step("transcribe a short speech file", () => transcribe(client, opts.audio));
      const heard = SPEECH.toLowerCase().match(/[a-z]+/g).filter((w) => transcript.toLowerCase().includes(w));
      if (heard.length < 6) throw new Error(`the transcript misses most words: ${JSON.stringify(transcript)}`);
      ran.push("transcribe");
    }
    if (has("local_model")) {
      const answer = await step("local model answer", () => localAnswer(client));
      if (!answer.content || !(answer.usage?.outputTokens > 0)) throw new Error(`no local answer: ${JSON.stringify(answer)}`);
      ran.push("local");
    }
    let mcpPid = null;
    if (has("mcp")) {
      const host = await step("install an MCP plugin", () => installPlugin(client, init.data_dir));
      if (host.status !== "ready" || !host.tools.includes("everything.echo")) {
        throw new Error(`the plugin's server is not ready: ${JSON.stringify(host)}`);
      }
      mcpPid = host.pid;
      ran.push("plugin");
    }
    if (has("export", "chromium")) {
      const pdf = await step("export a PDF", () => exportPdf(client));
      if (pdf.subarray(0, 5).toString("latin1") !== "%PDF-") throw new Error("the export is not a PDF");
      ran.push("pdf");
    }
    emit({ ok: true, sidecarPid: client.pid, mcpPid, ran, unavailable });
  } catch (error) {
    emit({ ok: false, error: `${error?.data?.code ?? ""} ${error?.message ?? error}` });
    await client?.dispose();
    process.exit(1);
  }
  setInterval(() => {}, 1 << 30); // the app keeps running until it is killed
}

/** The events of a resource up to its terminal one. */
async function until(client, resourceId) {
  const events = [];
  for await (const e of client.subscribe(resourceId)) events.push(e);
  return events;
}

async function transcribe(client, path) {
  const { attachment_id } = await client.request("attachments/import", { path });
  const job = await client.request("media/transcriptions/create", {
    attachment_id,
    profile_id: "en-fast",
    diarization: false,
  });
  const last = (await until(client, job.job_id)).at(-1);
  if (last?.event !== "Completed") throw new Error(`transcription ended ${JSON.stringify(last)}`);
  return (await client.request("media/transcriptions/get", { job_id: job.job_id })).text ?? "";
}

async function localAnswer(client) {
  await client.request("providers/create", { preset: "local", provider_id: "local" });
  const request = {
    meta: { sessionId: "smoke", iteration: 1, requestId: "smoke-local", timestamp: 1, agentVersion: "smoke" },
    systemPrompt: { roleDefinition: "You are a helpful assistant.", outputConstraints: "", safetyGuidelines: "" },
    messages: [{ role: "user", content: "Say hello in one short sentence.", timestamp: 1 }],
    params: { stream: true, maxTokens: 16 },
  };
  const call = client.stream("chat/stream", { provider_id: "local", request });
  for await (const line of call.events) if (line.type === "error") throw new Error(JSON.stringify(line));
  return call.result;
}

async function installPlugin(client, dataDir) {
  // the host hands a package over as a folder under <data>/plugins/.incoming/<package_id>, then installs it by id
  const packageId = "everything-smoke";
  const folder = join(dataDir, "plugins", ".incoming", packageId);
  mkdirSync(folder, { recursive: true });
  const manifest = {
    id: "everything",
    name: "Everything",
    version: "1.0.0",
    description: "the MCP reference server",
    min_app_version: "0.1.0",
    backend: { type: "mcp", transport: "stdio", command: process.execPath, args: [EVERYTHING, "stdio"] },
    permissions: ["tools"],
    tools: { timeout_ms: 10000 },
  };
  writeFileSync(join(folder, "plugin.json"), JSON.stringify(manifest));
  return (await client.request("plugins/install", { package_id: packageId })).host;
}

async function exportPdf(client) {
  const source = { type: "markdown", markdown: "# Smoke\n\nA paragraph with *emphasis*.\n\n- one\n- two", title: "smoke" };
  const job = await client.request("exports/create", { source, format: "pdf" });
  const last = (await until(client, job.job_id)).at(-1);
  if (last?.event !== "Completed") throw new Error(`the export ended ${JSON.stringify(last)}`);
  const chunks = [];
  for (let offset = 0; ; ) {
    const part = await client.request("exports/file", { job_id: job.job_id, offset, length: 1 << 20 });
    chunks.push(Buffer.from(part.data_base64, "base64"));
    offset += part.length;
    if (part.eof) return Buffer.concat(chunks);
  }
}
