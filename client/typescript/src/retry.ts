/**
 * The retry decision of the retrysafe client: one table by status, problem
 * code and Retry-After, exponential backoff with full jitter, and Retry-After
 * in both of its forms. It mirrors the Go client (client/classify.go,
 * client/backoff.go); the wire contract behind it is wire/code.go.
 */
import { lookupGeneric } from "./codes.js";

/** What the client does with the result of one attempt. */
export type Decision =
  /** 2xx: the operation succeeded, freshly or as a replay. */
  | "done"
  /** The outcome is unknown or the server asked to come back later: send the same request again, same ID or key. */
  | "retry"
  /** 401: refresh the token once and send again at once, same ID or key. */
  | "refresh"
  /** A definitive answer: never retried. */
  | "fail";

const retryableStatuses = new Set([408, 425, 429, 500, 502, 503, 504]);

/**
 * classifyAnswer is the client's retry decision table, the only place where
 * it is written down. status is the answer's HTTP status (0 when there was
 * none), code its problem code ("" when none), retryAfter whether it carried
 * Retry-After, and transportError whether the attempt got no answer (a
 * connection that broke, a lost answer, an attempt timeout). A caller's own
 * cancellation is not an attempt's failure and never reaches this table.
 *
 * - a transport error: retry.
 * - 2xx: done. 401: refresh.
 * - a code of the contract that is retryable at its status (409
 *   request_in_progress or outcome_pending, 429, 503): retry.
 * - 408, 425, 429, 500, 502, 503, 504: retry.
 * - 409 with a code the contract does not define (a service's own) and
 *   Retry-After: retry. The server sends Retry-After on exactly the answers
 *   that may be retried with the same ID or key.
 * - anything else, notably 400, 402, 404, 409 resource_locked, 410, 412,
 *   413, 415, 422: fail.
 */
export function classifyAnswer(status: number, code: string, retryAfter: boolean, transportError: boolean): Decision {
  if (transportError) return "retry";
  if (status >= 200 && status <= 299) return "done";
  if (status === 401) return "refresh";
  const info = lookupGeneric(code);
  if (info?.retryable && info.status === status) return "retry";
  if (retryableStatuses.has(status)) return "retry";
  if (status === 409 && info === undefined && code !== "" && retryAfter) return "retry";
  return "fail";
}

/**
 * mayHaveTakenEffect reports whether an attempt that ended this way, and is
 * to be retried, may have changed state on the server unseen: a lost
 * answer, a 5xx, or a 409 saying the key is still being worked on.
 */
export function mayHaveTakenEffect(status: number, transportError: boolean): boolean {
  return transportError || status >= 500 || status === 409;
}

/**
 * isDefinitive reports whether a final answer settles the outcome for this
 * ID or key on its own. Authentication runs before any replay, so 401, 403
 * and 407 say nothing about earlier attempts.
 */
export function isDefinitive(status: number): boolean {
  if (status === 401 || status === 403 || status === 407) return false;
  return status >= 400 && status <= 499;
}

/** Backoff: exponential from baseMs, capped at maxMs, with full jitter. */
export interface Backoff {
  readonly baseMs: number;
  readonly maxMs: number;
  readonly random: () => number;
}

/** ceiling returns min(maxMs, baseMs * 2^retry). */
export function ceiling(b: Backoff, retry: number): number {
  let c = b.baseMs;
  for (let i = 0; i < retry; i++) {
    if (c > b.maxMs / 2) return b.maxMs;
    c *= 2;
  }
  return Math.min(c, b.maxMs);
}

/**
 * delay returns the wait before retry number retry (0 for the first): uniform
 * in [0, ceiling], raised to the server's Retry-After when it asked for
 * longer. It returns undefined when the wait would not end within budgetMs:
 * the caller stops instead of sleeping.
 */
export function delay(b: Backoff, retry: number, retryAfterMs: number | undefined, budgetMs: number): number | undefined {
  const ceil = ceiling(b, retry);
  let r = b.random();
  if (!(r >= 0 && r <= 1)) r = 0;
  let d = Math.min(Math.max(ceil * r, 0), ceil);
  if (retryAfterMs !== undefined && retryAfterMs > d) d = retryAfterMs;
  return d < budgetMs ? d : undefined;
}

const maxDeltaSeconds = 2n ** 63n - 1n;
const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const imfFixdate = /^[A-Z][a-z]{2}, (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const rfc850 = /^[A-Z][a-z]+, (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const asctime = /^[A-Z][a-z]{2} ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/** httpDate reads the three date forms of RFC 9110 §5.6.7 as milliseconds since the epoch. */
function httpDate(v: string): number | undefined {
  let day: string, mon: string, year: number, h: string, m: string, s: string;
  let match: RegExpExecArray | null;
  if ((match = imfFixdate.exec(v))) {
    [, day, mon, , h, m, s] = match;
    year = Number(match[3]);
  } else if ((match = rfc850.exec(v))) {
    [, day, mon, , h, m, s] = match;
    const yy = Number(match[3]);
    year = yy < 69 ? 2000 + yy : 1900 + yy; // as Go's time.Parse reads a two-digit year
  } else if ((match = asctime.exec(v))) {
    [, mon, day, h, m, s] = match;
    year = Number(match[6]);
  } else {
    return undefined;
  }
  const month = months.indexOf(mon);
  if (month < 0) return undefined;
  return Date.UTC(year, month, Number(day.trim()), Number(h), Number(m), Number(s));
}

/**
 * parseRetryAfter reads a Retry-After value, delta-seconds or an HTTP-date,
 * as a wait in milliseconds from nowMs; a date in the past is a zero wait.
 * It returns undefined when the value is absent or unreadable.
 */
export function parseRetryAfter(value: string | null | undefined, nowMs: number): number | undefined {
  const v = (value ?? "").trim();
  if (v === "") return undefined;
  if (/^\d+$/.test(v)) {
    const secs = BigInt(v);
    return secs > maxDeltaSeconds ? undefined : Number(secs) * 1000;
  }
  const at = httpDate(v);
  return at === undefined ? undefined : Math.max(at - nowMs, 0);
}

/** An RFC 9457 problem details document as a retrysafe API writes it. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  [extension: string]: unknown;
}

/**
 * parseProblem decodes body when contentType is application/problem+json,
 * or application/json carrying a code, title or type, and the body is a
 * JSON object; otherwise it returns undefined.
 */
export function parseProblem(contentType: string | null, body: Uint8Array): Problem | undefined {
  const mediaType = (contentType ?? "").split(";")[0].trim().toLowerCase();
  if (mediaType !== "application/problem+json" && mediaType !== "application/json") return undefined;
  let p: unknown;
  try {
    p = JSON.parse(new TextDecoder().decode(body));
  } catch {
    return undefined;
  }
  if (p === null || typeof p !== "object" || Array.isArray(p)) return undefined;
  const problem = p as Problem;
  if (mediaType === "application/json" && !problem.code && !problem.title && !problem.type) return undefined;
  return problem;
}
