export { RetrysafeClient, RetrysafeError, defaults, type AnswerInfo, type AttemptEvent, type Config } from "./client.js";
export { genericCodes, lookupGeneric, type CodeInfo } from "./codes.js";
export {
  InvalidKeyError,
  KeyExpiredError,
  MemoryKeyStore,
  WebStorageKeyStore,
  maxKeyLength,
  newId,
  validateId,
  validateKey,
  type KeyStore,
  type StoredKey,
} from "./keys.js";
export { ceiling, classifyAnswer, delay, isDefinitive, mayHaveTakenEffect, parseProblem, parseRetryAfter, type Backoff, type Decision, type Problem } from "./retry.js";
export type { components, operations, paths } from "./schema.js";
