/** Shared by the tests: the sidecar to run (source install, or the binary via SIDECAR_CMD), a data dir each. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { fileURLToPath } from "node:url";

import { MetonaClient, pythonCommand, type MetonaClientOptions, type SidecarCommand } from "../src/index.js";

export const ROOT = fileURLToPath(new URL("../../../../", import.meta.url));
export const FAKE_SIDECAR = fileURLToPath(new URL("../../test/fixtures/fake-sidecar.mjs", import.meta.url));

/** `SIDECAR_CMD` (the binary, split on spaces) or `.venv/bin/python -m sidecar` from the repo root. */
export function sidecarCommand(extraArgs: string[] = []): SidecarCommand {
  const cmd = process.env.SIDECAR_CMD;
  if (cmd) {
    const [command, ...args] = cmd.split(/\s+/).filter(Boolean);
    return { command: command as string, args: [...args, ...extraArgs], cwd: ROOT };
  }
  return pythonCommand({ cwd: ROOT, python: join(ROOT, ".venv", "bin", "python"), args: extraArgs });
}

/** A fresh data dir (and secrets key) for one test, removed after it; dev methods on (dev/jobs/*). */
export function sandbox(t: TestContext): { dir: string; env: NodeJS.ProcessEnv } {
  const dir = mkdtempSync(join(tmpdir(), "metona-client-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const env = {
    ...process.env,
    METONA_DATA_DIR: join(dir, "data"),
    METONA_SECRET_KEY_FILE: join(dir, "data.key"),
    METONA_DEV_METHODS: "1",
  };
  return { dir, env };
}

/** The sidecar behind a gate: the starts whose 0-based index matches `failing` (a sh `case` pattern) exit 3. */
export function flakySidecar(t: TestContext, failing: string): SidecarCommand {
  const counter = join(sandbox(t).dir, "starts");
  const gate = `n=$(cat "$0" 2>/dev/null || echo 0); echo $((n+1)) > "$0"; case $n in ${failing}) exit 3;; esac; exec "$@"`;
  const real = sidecarCommand();
  return { ...real, command: "sh", args: ["-c", gate, counter, real.command, ...(real.args ?? [])] };
}

export interface Started {
  client: MetonaClient;
  logs: string[];
  dir: string;
}

/** A started client on a fresh data dir; disposed after the test. */
export async function startClient(t: TestContext, options: Partial<MetonaClientOptions> = {}): Promise<Started> {
  const { dir, env } = sandbox(t);
  const logs: string[] = [];
  const client = await MetonaClient.start({
    ...sidecarCommand(),
    env,
    clientName: "node-test",
    logger: (line) => logs.push(line),
    ...options,
  });
  t.after(() => client.dispose());
  return { client, logs, dir };
}

/** Whether a process (or, with a negative pid, any process of a group) exists. */
export function exists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The next value of an iterator (fails the test if it ended). */
export async function nextValue<T>(it: AsyncIterator<T>): Promise<T> {
  const r = await it.next();
  if (r.done) throw new Error("the iterator ended early");
  return r.value;
}

/** The IR request of a chat call (the mock provider answers it from its script). */
export function irRequest(text: string, requestId: string) {
  return {
    meta: { sessionId: "s1", iteration: 1, requestId, timestamp: 1, agentVersion: "node-test" },
    systemPrompt: { roleDefinition: "You help.", outputConstraints: "", safetyGuidelines: "" },
    messages: [{ role: "user" as const, content: text, timestamp: 1 }],
    params: { stream: true },
  };
}
