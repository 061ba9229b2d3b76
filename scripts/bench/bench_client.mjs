#!/usr/bin/env node
// Per-request overhead of the TypeScript client (ipc_schema/client, built by scripts/setup) against a raw pipe
// round trip in Node: the same sidecar command, `ping` after `ping`, one request in flight at a time.
//
//   node scripts/bench/bench_client.mjs [--n 4000] [--block 1] [--json out.json] [--aa] [--echo]
//
// Two processes of the same command: one driven by hand (JSON.stringify + write, split stdout on "\n",
// JSON.parse), one by MetonaClient. Requests alternate between them (blocks of --block) so load hits both alike.
// Overhead = client median − raw median (and the same for p99); ratio = client / raw. SIDECAR_CMD (split on
// spaces) runs the binary instead of `.venv/bin/python -m sidecar`. --aa drives the second process by hand too (an
// A/A run: what two processes differ by with no client at all, the noise floor of the comparison). --echo replaces
// the sidecar by a tiny Node peer that answers every line at once: what is left is the client's own cost.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const { MetonaClient } = await import(join(ROOT, "ipc_schema/client/dist/src/index.js")).catch(() => {
  console.error("ipc_schema/client/dist is missing: run `bash scripts/setup`");
  process.exit(2);
});

const { values: opts } = parseArgs({
  options: {
    n: { type: "string", default: "4000" },
    block: { type: "string", default: "1" },
    json: { type: "string" },
    aa: { type: "boolean", default: false },
    echo: { type: "boolean", default: false },
  },
});
const N = Number(opts.n);
const BLOCK = Number(opts.block);

const ECHO = `require("readline").createInterface({ input: process.stdin }).on("line", (l) => {
  const m = JSON.parse(l);
  const result = m.method === "initialize" ? { capabilities: { limits: { max_line_bytes: 1 << 26 } } } : {};
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result }) + "\\n");
});`;

function command() {
  if (opts.echo) return { command: process.execPath, args: ["-e", ECHO] };
  const cmd = process.env.SIDECAR_CMD;
  if (cmd) {
    const [c, ...args] = cmd.split(/\s+/).filter(Boolean);
    return { command: c, args };
  }
  return { command: join(ROOT, ".venv/bin/python"), args: ["-m", "sidecar"] };
}

/** The raw pipe: what any Node host would write without a client. */
function rawSidecar(env) {
  const { command: c, args } = command();
  const proc = spawn(c, args, { cwd: ROOT, env, stdio: ["pipe", "pipe", "ignore"] });
  let buf = "";
  let waiter = null;
  proc.stdout.setEncoding("utf8");
  proc.stdout.on("data", (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      const msg = JSON.parse(line);
      if (waiter && msg.id === waiter.id) {
        const w = waiter;
        waiter = null;
        w.resolve(msg);
      }
    }
  });
  let id = 0;
  const call = (method, params) =>
    new Promise((resolve) => {
      waiter = { id: ++id, resolve };
      proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  return { proc, call };
}

function quantile(sorted, q) {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i];
}

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  return { median_ms: quantile(s, 0.5), p99_ms: quantile(s, 0.99), n: s.length };
}

const box = mkdtempSync(join(tmpdir(), "metona-bench-client-"));
const envFor = (name) => ({
  ...process.env,
  METONA_DATA_DIR: join(box, name),
  METONA_SECRET_KEY_FILE: join(box, `${name}.key`),
  METONA_LOG_LEVEL: "WARNING",
});

const raw = rawSidecar(envFor("raw"));
await raw.call("initialize", { client_info: { name: "bench-raw" } });
let client;
if (opts.aa) {
  const second = rawSidecar(envFor("client"));
  await second.call("initialize", { client_info: { name: "bench-raw-2" } });
  client = {
    request: second.call,
    dispose: () => {
      second.proc.stdin.end();
      return new Promise((resolve) => second.proc.once("close", resolve));
    },
  };
} else {
  client = await MetonaClient.start({ ...command(), cwd: ROOT, env: envFor("client"), logger: () => {} });
}

const rawSamples = [];
const clientSamples = [];
const now = () => process.hrtime.bigint();
// warm-up: JIT on both paths, the sidecar's first requests
for (let i = 0; i < 200; i++) {
  await raw.call("ping", {});
  await client.request("ping", {});
}
for (let done = 0; done < N; done += BLOCK) {
  for (let i = 0; i < BLOCK; i++) {
    const t0 = now();
    await raw.call("ping", {});
    rawSamples.push(Number(now() - t0) / 1e6);
  }
  for (let i = 0; i < BLOCK; i++) {
    const t0 = now();
    await client.request("ping", {});
    clientSamples.push(Number(now() - t0) / 1e6);
  }
}

await client.dispose();
raw.proc.stdin.end();
await new Promise((resolve) => raw.proc.once("close", resolve));
rmSync(box, { recursive: true, force: true });

const r = stats(rawSamples);
const c = stats(clientSamples);
const report = {
  sidecar: opts.echo ? "echo peer (no sidecar)" : process.env.SIDECAR_CMD ? "binary (SIDECAR_CMD)" : "python -m sidecar",
  mode: opts.aa ? "A/A: raw pipe vs raw pipe" : "raw pipe vs client",
  node: process.version,
  requests_each: N,
  raw_pipe: r,
  client: c,
  overhead_median_ms: c.median_ms - r.median_ms,
  overhead_p99_ms: c.p99_ms - r.p99_ms,
  ratio_median: c.median_ms / r.median_ms,
  ratio_p99: c.p99_ms / r.p99_ms,
  goal_overhead_median_ms: 0.2,
};
const f = (x) => x.toFixed(3);
console.log(`ping round trip, ${N} each, ${report.sidecar}, node ${process.version}, ${report.mode}`);
console.log(`  raw pipe : median ${f(r.median_ms)} ms   p99 ${f(r.p99_ms)} ms`);
console.log(`  ${opts.aa ? "raw 2   " : "client  "} : median ${f(c.median_ms)} ms   p99 ${f(c.p99_ms)} ms`);
console.log(
  `  overhead : median ${f(report.overhead_median_ms)} ms (×${report.ratio_median.toFixed(3)})   ` +
    `p99 ${f(report.overhead_p99_ms)} ms (×${report.ratio_p99.toFixed(3)})   goal ≤ 0.2 ms median`,
);
if (opts.json) writeFileSync(opts.json, JSON.stringify(report, null, 2) + "\n");
