import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ceiling, classifyAnswer, delay, genericCodes, parseProblem, parseRetryAfter, type Decision } from "../src/index.js";

const allCodes = ["card_declined", "currency_mismatch", "insufficient_funds", ...Object.keys(genericCodes)];

/** The decision table written independently of classifyAnswer (client/classify_test.go's wantDecision). */
function wantDecision(status: number, code: string): Decision {
  if (status >= 200 && status < 300) return "done";
  if (status === 401) return "refresh";
  if ([408, 425, 429, 500, 502, 503, 504].includes(status)) return "retry";
  if (status === 409 && (code === "request_in_progress" || code === "outcome_pending")) return "retry";
  return "fail";
}

describe("classifyAnswer", () => {
  it("follows the table for every status and contract code", () => {
    for (let status = 100; status <= 599; status++) {
      for (const code of ["", ...allCodes]) {
        assert.equal(classifyAnswer(status, code, false, false), wantDecision(status, code), `${status} ${code}`);
      }
    }
  });

  it("never retries a definitive answer", () => {
    for (const status of [400, 402, 404, 410, 412, 413, 422]) {
      for (const code of allCodes) assert.equal(classifyAnswer(status, code, true, false), "fail", `${status} ${code}`);
    }
  });

  it("judges a code it does not know by status and Retry-After", () => {
    const cases: [number, string, boolean, Decision][] = [
      [409, "ledger_busy", true, "retry"],
      [409, "ledger_busy", false, "fail"],
      [409, "currency_mismatch", false, "fail"],
      [409, "resource_locked", true, "fail"],
      [409, "request_in_progress", false, "retry"],
      [402, "card_declined", true, "fail"],
      [422, "insufficient_funds", true, "fail"],
      [429, "", false, "retry"],
      [503, "maintenance", false, "retry"],
      [409, "", true, "fail"],
    ];
    for (const [status, code, retryAfter, want] of cases) {
      assert.equal(classifyAnswer(status, code, retryAfter, false), want, `${status} ${code} ${retryAfter}`);
    }
  });

  it("retries every transport error", () => {
    for (const status of [0, 200, 400, 503]) assert.equal(classifyAnswer(status, "", false, true), "retry");
  });
});

describe("backoff", () => {
  it("draws below min(max, base·2^retry), raised to Retry-After, within the budget", () => {
    let seed = 42;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 20000; i++) {
      const baseMs = 1 + rnd() * 10_000;
      const maxMs = baseMs + rnd() * 3_600_000;
      const r = rnd();
      const retry = Math.floor(rnd() * 200);
      const retryAfter = rnd() < 0.5 ? undefined : rnd() * 7_200_000;
      const budget = -1000 + rnd() * 10_800_000;
      const ceil = Math.min(maxMs, baseMs * 2 ** retry);
      const d = delay({ baseMs, maxMs, random: () => r }, retry, retryAfter, budget);
      const want = Math.max(ceil * r, retryAfter ?? 0);
      assert.equal(d !== undefined, want < budget, `ok for a wait of ${want} in ${budget}`);
      if (d === undefined) continue;
      assert.ok(d >= 0 && d < budget);
      if (retryAfter !== undefined) assert.ok(d >= retryAfter && d <= Math.max(retryAfter, ceil));
      else assert.ok(d <= ceil);
    }
  });

  it("computes the ceiling exactly", () => {
    const cases: [number, number, number, number][] = [
      [3, 7, 1, 6], [3, 7, 2, 7], [4, 8, 1, 8], [1000, 60_000, 0, 1000], [1, 5000, 200, 5000],
    ];
    for (const [baseMs, maxMs, retry, want] of cases) assert.equal(ceiling({ baseMs, maxMs, random: Math.random }, retry), want);
  });

  it("ignores a random number outside [0, 1]", () => {
    for (const r of [-1, 2, Number.NaN]) {
      const d = delay({ baseMs: 1000, maxMs: 60_000, random: () => r }, 3, undefined, 3_600_000);
      assert.ok(d !== undefined && d >= 0 && d <= 8000, `${r}: ${d}`);
    }
  });
});

describe("parseRetryAfter", () => {
  it("reads delta-seconds and the three HTTP-date forms", () => {
    const now = Date.UTC(2030, 0, 2, 3, 4, 5);
    const cases: [string | null, number | undefined][] = [
      [null, undefined],
      ["", undefined],
      ["0", 0],
      ["7", 7000],
      [" 120 ", 120_000],
      ["-1", undefined],
      ["1.5", undefined],
      ["soon", undefined],
      [new Date(now + 90_000).toUTCString(), 90_000],
      [new Date(now - 60_000).toUTCString(), 0],
      ["Wednesday, 02-Jan-30 03:04:15 GMT", 10_000],
      ["Wed Jan  2 03:04:25 2030", 20_000],
      ["99999999999999999999", undefined],
    ];
    for (const [v, want] of cases) assert.equal(parseRetryAfter(v, now), want, String(v));
  });
});

describe("parseProblem", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  it("reads problem+json, and JSON that carries a code", () => {
    assert.equal(parseProblem("application/problem+json", enc('{"code":"unavailable","status":503}'))?.code, "unavailable");
    assert.equal(parseProblem("application/json; charset=utf-8", enc('{"code":"card_declined"}'))?.code, "card_declined");
    assert.equal(parseProblem("application/json", enc('{"id":"pay_1"}')), undefined);
    assert.equal(parseProblem("text/plain", enc('{"code":"x"}')), undefined);
    assert.equal(parseProblem("application/problem+json", enc("[1]")), undefined);
    assert.equal(parseProblem("application/problem+json", enc("not json")), undefined);
  });
});
