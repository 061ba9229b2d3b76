/** Errors of the client: every failure is a `SidecarError` carrying the wire's JSON-RPC error object. */

/** `data` of a JSON-RPC error (ARCHITECTURE §4): the project's code plus optional details. */
export interface SidecarErrorData {
  code: string;
  details?: Record<string, unknown>;
  [k: string]: unknown;
}

/** A request that failed: the sidecar's own error, or one the client made with the same shape. */
export class SidecarError extends Error {
  readonly code: number;
  readonly data: SidecarErrorData;

  constructor(code: number, message: string, data: SidecarErrorData) {
    super(message);
    this.name = "SidecarError";
    this.code = code;
    this.data = data;
  }

  /** The project's code (`data.code`), e.g. `NOTE_NOT_FOUND`, `REQUEST_CANCELLED`, `SIDECAR_EXITED`. */
  get projectCode(): string {
    return this.data.code;
  }

  /** The error object of a JSON-RPC response; a malformed one still becomes a typed error. */
  static fromWire(error: unknown): SidecarError {
    const e = (error ?? {}) as { code?: unknown; message?: unknown; data?: unknown };
    const data = (e.data && typeof e.data === "object" ? e.data : {}) as Partial<SidecarErrorData>;
    return new SidecarError(
      typeof e.code === "number" ? e.code : 0,
      typeof e.message === "string" ? e.message : "error",
      { ...data, code: typeof data.code === "string" ? data.code : "UNKNOWN" },
    );
  }
}

/** JSON-RPC codes the client uses itself, the same as the sidecar answers (ARCHITECTURE §4). */
export const REQUEST_CANCELLED = -32800;
export const INVALID_REQUEST = -32600;
/** A sidecar that is gone (exited, not started, disposed): HTTP 503, as the phase-2 *_UNAVAILABLE codes. */
export const UNAVAILABLE = 503;
/** A sidecar that did not answer `initialize` in time: HTTP 504. */
export const TIMEOUT = 504;

export function cancelledError(): SidecarError {
  return new SidecarError(REQUEST_CANCELLED, "Request cancelled", { code: "REQUEST_CANCELLED" });
}

export function exitedError(exitCode: number | null, signal: string | null): SidecarError {
  return new SidecarError(UNAVAILABLE, "The sidecar process exited", {
    code: "SIDECAR_EXITED",
    details: { exit_code: exitCode, signal },
  });
}

export function unavailableError(reason: string, cause?: SidecarError): SidecarError {
  const details: Record<string, unknown> = { reason };
  if (cause) details.cause = { code: cause.code, message: cause.message, data: cause.data };
  return new SidecarError(UNAVAILABLE, "The sidecar is not available", { code: "SIDECAR_UNAVAILABLE", details });
}
