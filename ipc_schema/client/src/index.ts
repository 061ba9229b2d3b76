export * from "./generated.js";
export {
  MetonaClient,
  binaryCommand,
  pythonCommand,
  type MetonaClientOptions,
  type RequestArgs,
  type RequestOptions,
  type RestartInfo,
  type RestartPolicy,
  type SidecarCommand,
  type StreamCall,
  type StreamMethod,
  type SubscribeOptions,
} from "./client.js";
export { SidecarError, type SidecarErrorData } from "./errors.js";
