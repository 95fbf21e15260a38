/**
 * RetrysafeClient: the generated, typed client of a retrysafe API
 * (openapi-fetch over the types that openapi-typescript made from the
 * API's OpenAPI document), sending every request through one retry loop.
 */
import createClient, { type Client } from "openapi-fetch";

import { KeyExpiredError, newId, validateId, validateKey, type KeyStore } from "./keys.js";
import {
  classifyAnswer,
  delay,
  isDefinitive,
  mayHaveTakenEffect,
  parseProblem,
  parseRetryAfter,
  type Backoff,
  type Decision,
  type Problem,
} from "./retry.js";
import type { paths } from "./schema.js";

/** Settings of a RetrysafeClient. Every field but baseUrl has a default. */
export interface Config {
  /** The API's base URL, absolute http(s), for example "https://api.example.com". Required. */
  baseUrl: string;
  /** Sent as "Authorization: Bearer <token>". Defaults to none. */
  token?: string;
  /**
   * Called on a 401; returns the token to use from then on, and the same
   * request is sent again with the same ID or key. A 401 right after a
   * refresh is final. Defaults to none: a 401 is final.
   */
  refreshToken?: () => Promise<string>;
  /**
   * Keeps the key or ID of each logical operation that names one, before
   * its first request (see resourceId and idempotencyKey). Defaults to
   * none: keys live as long as the caller holds them.
   */
  keyStore?: KeyStore;
  /** How long the server remembers an idempotency key; an older stored key is refused. Defaults to 24 hours. */
  replayWindowMs?: number;
  /**
   * Caps the requests sent for one logical operation, the first included.
   * Size it with maxElapsedMs as the Go client's docs/clients.md says.
   * Defaults to 50.
   */
  maxAttempts?: number;
  /**
   * Caps the time from the first attempt's start to the last one's end,
   * waits included: a retry whose wait would end past it is not made.
   * Defaults to 90 seconds, which outlasts a retrysafe server's default lease.
   */
  maxElapsedMs?: number;
  /** Bounds each attempt (connect, send, read the whole answer); an attempt that times out is retried. Defaults to 10 seconds. */
  attemptTimeoutMs?: number;
  /** The backoff ceiling before the first retry; it doubles per retry up to maxDelayMs, and the wait is drawn below it. Defaults to 100 ms. */
  baseDelayMs?: number;
  /** Caps the backoff ceiling; a longer Retry-After is still honoured. Defaults to 5 seconds, or baseDelayMs when longer. */
  maxDelayMs?: number;
  /** The UUID version of generated IDs and keys: 7 (time-ordered) or 4. Defaults to 7. */
  uuidVersion?: 4 | 7;
  /** Caps the answer body read. Defaults to 10 MiB. */
  maxResponseBytes?: number;
  /** Sends one attempt. Defaults to globalThis.fetch. */
  fetch?: (request: Request) => Promise<Response>;
  /** Called after every attempt (never with the key or the token). Defaults to none. */
  onAttempt?: (event: AttemptEvent) => void;
  /** The clock for the elapsed-time cap and HTTP-date Retry-After, in ms. Defaults to Date.now. */
  now?: () => number;
  /** Waits ms or until signal aborts (then rejects). Defaults to a timer. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** A number in [0, 1) for the jitter. Defaults to Math.random. */
  random?: () => number;
}

/** The defaults of Config, the Go client's. */
export const defaults = {
  replayWindowMs: 24 * 60 * 60 * 1000,
  maxAttempts: 50,
  maxElapsedMs: 90_000,
  attemptTimeoutMs: 10_000,
  baseDelayMs: 100,
  maxDelayMs: 5_000,
  uuidVersion: 7,
  maxResponseBytes: 10 << 20,
} as const;

/** What onAttempt is told about one attempt. */
export interface AttemptEvent {
  method: string;
  url: string;
  attempt: number;
  /** The answer's status, 0 when none came. */
  status: number;
  code: string;
  decision: Decision;
  error?: unknown;
}

/** What the retry loop knows of an answer it returned. */
export interface AnswerInfo {
  /** Requests sent for the operation, this one included. */
  attempts: number;
  /** The server answered with "Idempotent-Replayed: true": an earlier attempt or call took effect, and this is its result. */
  replayed: boolean;
  /** The answer's body, byte for byte. */
  body: Uint8Array;
  /** An earlier attempt may have taken effect unseen (its answer was lost, or was a 5xx or 409). */
  afterUnknownOutcome: boolean;
}

/**
 * RetrysafeError is thrown when the retries ended without an answer that
 * settles the operation: the caps were reached on a retryable answer, the
 * caller aborted, or a final answer (a 412 to a conditional write, a 401)
 * came after an attempt that may have taken effect. When outcomeKnown is
 * false the operation may or may not have happened: retry later with the
 * same ID or key, never a new one.
 */
export class RetrysafeError extends Error {
  override name = "RetrysafeError";
  readonly method: string;
  readonly url: string;
  /** The last answer's status, 0 when the last attempt got none. */
  readonly status: number;
  /** The last answer's problem code, "" when none. */
  readonly code: string;
  readonly problem?: Problem;
  readonly headers?: Headers;
  readonly body?: Uint8Array;
  readonly attempts: number;
  readonly outcomeKnown: boolean;
  /** The caps (maxAttempts, maxElapsedMs), not the server, ended the retries. */
  readonly retriesExhausted: boolean;

  constructor(f: {
    method: string;
    url: string;
    status: number;
    problem?: Problem;
    headers?: Headers;
    body?: Uint8Array;
    attempts: number;
    outcomeKnown: boolean;
    retriesExhausted: boolean;
    reason?: string;
    cause?: unknown;
  }) {
    const code = f.problem?.code ?? "";
    let msg = `retrysafe: ${f.method} ${f.url}`;
    if (f.status !== 0) msg += `: ${f.status}`;
    if (code !== "") msg += ` (${code})`;
    if (f.problem?.detail) msg += `: ${f.problem.detail}`;
    if (f.reason) msg += `: ${f.reason}`;
    if (f.cause !== undefined) msg += `: ${f.cause instanceof Error ? f.cause.message : String(f.cause)}`;
    msg += ` [attempts=${f.attempts} outcome_known=${f.outcomeKnown}]`;
    super(msg, { cause: f.cause });
    this.method = f.method;
    this.url = f.url;
    this.status = f.status;
    this.code = code;
    this.problem = f.problem;
    this.headers = f.headers;
    this.body = f.body;
    this.attempts = f.attempts;
    this.outcomeKnown = f.outcomeKnown;
    this.retriesExhausted = f.retriesExhausted;
  }
}

/** One attempt's outcome: an answer, or a transport error. */
interface Attempt {
  status: number;
  statusText?: string;
  headers?: Headers;
  body?: Uint8Array;
  problem?: Problem;
  error?: unknown;
  tooLarge?: boolean;
}

/**
 * RetrysafeClient calls a retrysafe API and retries its writes safely.
 *
 * `api` is the typed client generated from the API's OpenAPI document
 * (openapi-fetch); every request it sends goes through one retry loop,
 * which re-sends the request unchanged, with the same resource ID (in its
 * path) or Idempotency-Key (in its headers) on every attempt. The ID or key
 * is made once per logical operation, before the first attempt, by
 * resourceId or idempotencyKey; with a keyStore and an operation name it is
 * saved first and reused by a process or page that starts again.
 *
 * The loop returns a Response for an answer that settles the operation (a
 * 2xx, fresh or replayed, or a final answer such as 402, 404, 412 or 422),
 * which openapi-fetch hands back as `data` or `error`; it throws a
 * RetrysafeError when it stopped without one.
 */
export class RetrysafeClient<Paths extends {} = paths> {
  /** The generated typed client; its requests are retried. */
  readonly api: Client<Paths>;
  /** The retry loop as a fetch function, for code that brings its own request. */
  readonly fetch: (request: Request) => Promise<Response>;

  readonly #cfg: Required<Omit<Config, "token" | "refreshToken" | "keyStore" | "onAttempt">> &
    Pick<Config, "refreshToken" | "keyStore" | "onAttempt">;
  readonly #backoff: Backoff;
  readonly #answers = new WeakMap<Response, AnswerInfo>();
  #token: string;

  constructor(config: Config) {
    let base: URL;
    try {
      base = new URL(config.baseUrl);
    } catch {
      throw new RangeError(`retrysafe: invalid config: baseUrl ${JSON.stringify(config.baseUrl)} is not an absolute URL`);
    }
    if (base.protocol !== "http:" && base.protocol !== "https:") {
      throw new RangeError(`retrysafe: invalid config: baseUrl ${JSON.stringify(config.baseUrl)} must be http(s)`);
    }
    const baseDelayMs = config.baseDelayMs ?? defaults.baseDelayMs;
    this.#cfg = {
      baseUrl: config.baseUrl,
      refreshToken: config.refreshToken,
      keyStore: config.keyStore,
      onAttempt: config.onAttempt,
      replayWindowMs: config.replayWindowMs ?? defaults.replayWindowMs,
      maxAttempts: config.maxAttempts ?? defaults.maxAttempts,
      maxElapsedMs: config.maxElapsedMs ?? defaults.maxElapsedMs,
      attemptTimeoutMs: config.attemptTimeoutMs ?? defaults.attemptTimeoutMs,
      baseDelayMs,
      maxDelayMs: config.maxDelayMs ?? Math.max(defaults.maxDelayMs, baseDelayMs),
      uuidVersion: config.uuidVersion ?? defaults.uuidVersion,
      maxResponseBytes: config.maxResponseBytes ?? defaults.maxResponseBytes,
      fetch: config.fetch ?? ((request) => globalThis.fetch(request)),
      now: config.now ?? Date.now,
      sleep: config.sleep ?? sleep,
      random: config.random ?? Math.random,
    };
    const c = this.#cfg;
    const invalid = (why: string) => new RangeError(`retrysafe: invalid config: ${why}`);
    if (!(c.replayWindowMs >= 0)) throw invalid(`replayWindowMs must not be negative, got ${c.replayWindowMs}`);
    if (!Number.isInteger(c.maxAttempts) || c.maxAttempts < 1) throw invalid(`maxAttempts must be an integer ≥ 1, got ${c.maxAttempts}`);
    if (!(c.maxElapsedMs >= 0)) throw invalid(`maxElapsedMs must not be negative, got ${c.maxElapsedMs}`);
    if (!(c.attemptTimeoutMs > 0)) throw invalid(`attemptTimeoutMs must be positive, got ${c.attemptTimeoutMs}`);
    if (!(c.baseDelayMs >= 0)) throw invalid(`baseDelayMs must not be negative, got ${c.baseDelayMs}`);
    if (!(c.maxDelayMs >= c.baseDelayMs)) throw invalid(`maxDelayMs (${c.maxDelayMs}) must be at least baseDelayMs (${c.baseDelayMs})`);
    if (c.uuidVersion !== 4 && c.uuidVersion !== 7) throw invalid(`uuidVersion must be 4 or 7, got ${c.uuidVersion}`);
    if (!(c.maxResponseBytes >= 0)) throw invalid(`maxResponseBytes must not be negative, got ${c.maxResponseBytes}`);

    this.#token = config.token ?? "";
    this.#backoff = { baseMs: c.baseDelayMs, maxMs: c.maxDelayMs, random: c.random };
    this.fetch = (request) => this.#send(request);
    this.api = createClient<Paths>({ baseUrl: config.baseUrl, fetch: this.fetch });
  }

  /** newId returns a new UUID of the configured version, for a resource ID or a key. */
  newId(): string {
    return newId(this.#cfg.uuidVersion);
  }

  /**
   * resourceId returns the ID of a logical create on the PUT pattern, made
   * once: the one stored for operation, else id, else a new UUID, saved for
   * operation before it is returned. Send it as the path's {id} with
   * "If-None-Match: *" on every attempt. A resource ID does not expire: the
   * server replays the creation for as long as the resource exists.
   */
  async resourceId(operation?: string, id?: string): Promise<string> {
    if (id !== undefined) validateId(id);
    const v = await this.#resolve(operation, id, false);
    validateId(v);
    return v;
  }

  /**
   * idempotencyKey returns the Idempotency-Key of a logical POST, made once:
   * the one stored for operation, else key, else a new UUID string, saved
   * for operation before it is returned. A stored key older than the
   * replay window is not returned: KeyExpiredError.
   */
  async idempotencyKey(operation?: string, key?: string): Promise<string> {
    if (key !== undefined) validateKey(key);
    const v = await this.#resolve(operation, key, true);
    validateKey(v);
    return v;
  }

  /**
   * forget deletes the key or ID stored for operation. Call it once the
   * outcome is known and recorded (a success acted on, or a final
   * rejection after which a new attempt needs a new key); never after a
   * RetrysafeError whose outcomeKnown is false.
   */
  async forget(operation: string): Promise<void> {
    await this.#cfg.keyStore?.delete(operation);
  }

  /** answerOf tells what the retry loop knows of a Response it returned (from api calls: their `response`). */
  answerOf(response: Response): AnswerInfo | undefined {
    return this.#answers.get(response);
  }

  async #resolve(operation: string | undefined, explicit: string | undefined, expires: boolean): Promise<string> {
    const store = this.#cfg.keyStore;
    if (!store || !operation) return explicit ?? this.newId();
    const stored = await store.load(operation);
    if (stored) {
      if (explicit !== undefined && explicit !== stored.key) {
        throw new Error(`retrysafe: operation ${JSON.stringify(operation)} is already bound to another key or ID; forget it first`);
      }
      const age = this.#cfg.now() - stored.savedAt;
      if (expires && stored.savedAt !== 0 && age >= this.#cfg.replayWindowMs) {
        throw new KeyExpiredError(operation, stored.key, age, this.#cfg.replayWindowMs);
      }
      return stored.key;
    }
    const v = explicit ?? this.newId();
    await store.save(operation, { key: v, savedAt: this.#cfg.now() });
    return v;
  }

  /** #send is the retry loop of one logical operation (client/client.go's do). */
  async #send(request: Request): Promise<Response> {
    const c = this.#cfg;
    const start = c.now();
    const caller = request.signal;
    const body = request.body === null ? undefined : new Uint8Array(await request.clone().arrayBuffer());
    // A 412 after an attempt that may have been applied may be that
    // attempt's own doing; a 404 or 410 to a DELETE after one is the goal.
    const conditional = request.headers.has("If-Match");
    const goneIsDone = request.method === "DELETE";
    let tries = 0;
    let retries = 0;
    let mayHaveEffect = false;
    let justRefreshed = false;
    let last: Attempt = { status: 0 };
    const fail = (outcomeKnown: boolean, extra: { reason?: string; cause?: unknown; exhausted?: boolean } = {}) =>
      new RetrysafeError({
        method: request.method,
        url: request.url,
        status: last.status,
        problem: last.problem,
        headers: last.headers,
        body: last.body,
        attempts: tries,
        outcomeKnown,
        retriesExhausted: extra.exhausted ?? false,
        reason: extra.reason,
        cause: extra.cause ?? last.error,
      });

    for (;;) {
      if (caller.aborted) throw fail(tries === 0 || !mayHaveEffect, { cause: caller.reason });
      const token = this.#token;
      tries++;
      last = await this.#attempt(request, body, token, c.maxElapsedMs - (c.now() - start));
      if (last.error !== undefined && caller.aborted) throw fail(false, { cause: caller.reason });
      if (last.tooLarge) {
        throw fail(Math.trunc(last.status / 100) === 2 || isDefinitive(last.status), { reason: `answer over ${c.maxResponseBytes} bytes` });
      }
      const transportError = last.error !== undefined;
      const code = last.problem?.code ?? "";
      const decision = classifyAnswer(last.status, code, last.headers?.has("Retry-After") ?? false, transportError);
      c.onAttempt?.({ method: request.method, url: request.url, attempt: tries, status: last.status, code, decision, error: last.error });

      switch (decision) {
        case "done":
          return this.#answer(last, tries, mayHaveEffect);

        case "fail": {
          if (goneIsDone && mayHaveEffect && (last.status === 404 || last.status === 410)) {
            return this.#answer(last, tries, mayHaveEffect);
          }
          let known = isDefinitive(last.status) || (last.status >= 400 && last.status <= 499 && !mayHaveEffect);
          if (conditional && mayHaveEffect && last.status === 412) known = false;
          if (known) return this.#answer(last, tries, mayHaveEffect);
          throw fail(false);
        }

        case "refresh": {
          if (!c.refreshToken || justRefreshed) {
            if (!mayHaveEffect) return this.#answer(last, tries, mayHaveEffect);
            throw fail(false);
          }
          if (tries >= c.maxAttempts) throw fail(!mayHaveEffect, { reason: `maxAttempts (${tries}) reached`, exhausted: true });
          try {
            if (this.#token === token) this.#token = await c.refreshToken();
          } catch (err) {
            throw fail(!mayHaveEffect, { reason: "refreshToken failed", cause: err });
          }
          justRefreshed = true;
          continue;
        }

        case "retry": {
          justRefreshed = false;
          mayHaveEffect ||= mayHaveTakenEffect(last.status, transportError);
          if (tries >= c.maxAttempts) throw fail(!mayHaveEffect, { reason: `maxAttempts (${tries}) reached`, exhausted: true });
          const now = c.now();
          const retryAfter = parseRetryAfter(last.headers?.get("Retry-After"), now);
          const wait = delay(this.#backoff, retries, retryAfter, c.maxElapsedMs - (now - start));
          if (wait === undefined) {
            throw fail(!mayHaveEffect, { reason: `the next retry would start after maxElapsedMs (${c.maxElapsedMs} ms)`, exhausted: true });
          }
          retries++;
          try {
            await c.sleep(wait, caller);
          } catch (err) {
            throw fail(!mayHaveEffect, { cause: err });
          }
        }
      }
    }
  }

  /** #attempt sends the request once, bounded by attemptTimeoutMs and the budget left. */
  async #attempt(request: Request, body: Uint8Array | undefined, token: string, budgetMs: number): Promise<Attempt> {
    const c = this.#cfg;
    const timeout = budgetMs > 0 ? Math.min(c.attemptTimeoutMs, budgetMs) : c.attemptTimeoutMs;
    const timer = new AbortController();
    const t = setTimeout(() => timer.abort(new DOMException(`attempt timed out after ${timeout} ms`, "TimeoutError")), timeout);
    const headers = new Headers(request.headers);
    if (token !== "") headers.set("Authorization", `Bearer ${token}`);
    if (!headers.has("Accept")) headers.set("Accept", "application/json, application/problem+json");
    const attempt: Attempt = { status: 0 };
    try {
      const res = await c.fetch(
        new Request(request, { headers, body: body as BodyInit | undefined, signal: AbortSignal.any([request.signal, timer.signal]) }),
      );
      attempt.status = res.status;
      attempt.statusText = res.statusText;
      attempt.headers = res.headers;
      const read = await readCapped(res, c.maxResponseBytes);
      attempt.body = read.bytes;
      attempt.tooLarge = read.tooLarge;
      if (!read.tooLarge && !res.ok) attempt.problem = parseProblem(res.headers.get("Content-Type"), read.bytes);
    } catch (err) {
      attempt.error = err;
    } finally {
      clearTimeout(t);
    }
    return attempt;
  }

  /** #answer turns an attempt into the Response handed to openapi-fetch and records what the loop knows of it. */
  #answer(a: Attempt, attempts: number, afterUnknownOutcome: boolean): Response {
    const body = a.body ?? new Uint8Array();
    const nullBody = a.status === 204 || a.status === 205 || a.status === 304;
    const res = new Response(nullBody ? null : (body as BodyInit), { status: a.status, statusText: a.statusText, headers: a.headers });
    this.#answers.set(res, {
      attempts,
      replayed: (a.headers?.get("Idempotent-Replayed") ?? "").toLowerCase() === "true",
      body,
      afterUnknownOutcome,
    });
    return res;
  }
}

/** readCapped reads a body up to max bytes; tooLarge says it had more. */
async function readCapped(res: Response, max: number): Promise<{ bytes: Uint8Array; tooLarge: boolean }> {
  if (res.body === null) return { bytes: new Uint8Array(), tooLarge: false };
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    n += value.length;
    if (n > max) {
      await reader.cancel();
      return { bytes: concat(chunks).subarray(0, max), tooLarge: true };
    }
  }
  return { bytes: concat(chunks), tooLarge: false };
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** sleep is the default Config.sleep. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
