// Type-level test (tsc --noEmit, run by `npm test`): the method map types params and results. Each line
// marked with the expect-error directive must really be an error; if the types became loose (e.g. `any`), tsc
// reports the unused directive and the test fails.
import type { ExportJob, MetonaClient, MetonaResult, Note, SidecarError } from "../../src/index.js";

export async function usage(client: MetonaClient, signal: AbortSignal): Promise<void> {
  const job: ExportJob = await client.request("exports/create", { source: { type: "note", note_id: "n1" }, format: "pdf" });
  const status: string = job.status;
  const note: Note = await client.request("notes/get", { note_id: "n1" }, { signal });
  const pong: MetonaResult<"ping"> = await client.request("ping");
  void [status, note, pong];

  // @ts-expect-error format must be a string
  await client.request("exports/create", { source: {}, format: 42 });
  // @ts-expect-error format is required
  await client.request("exports/create", { source: {} });
  // @ts-expect-error params are required for exports/create
  await client.request("exports/create");
  // @ts-expect-error an unknown key of a closed params type
  await client.request("notes/get", { note_id: "n1", bogus: true });
  // @ts-expect-error not a method of the sidecar
  await client.request("exports/nope", {});
  // @ts-expect-error the result of notes/get is a Note, not an ExportJob
  const wrong: ExportJob = await client.request("notes/get", { note_id: "n1" });
  void wrong;

  const { events, result } = client.stream("chat/stream", {
    request: {
      meta: { sessionId: "s", iteration: 1, requestId: "r", timestamp: 1, agentVersion: "v" },
      systemPrompt: { roleDefinition: "", outputConstraints: "", safetyGuidelines: "" },
      messages: [{ role: "user", content: "hi", timestamp: 1 }],
      params: { stream: true },
    },
  });
  for await (const line of events) {
    const seq: number = line.seq;
    void seq;
  }
  const content: string | undefined = (await result).content;
  void content;
  try {
    await client.request("ping");
  } catch (e) {
    const code: string = (e as SidecarError).data.code;
    void code;
  }
}
