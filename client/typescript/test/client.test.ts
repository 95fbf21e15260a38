import assert from "node:assert/strict";
import { after, describe, it } from "node:test";

import { KeyExpiredError, MemoryKeyStore, RetrysafeClient, RetrysafeError, WebStorageKeyStore, type Config } from "../src/index.js";
import { fakeAPI, problem, type FakeAPI, type Step } from "./fakeapi.js";

const order = { customer: "cus_1", currency: "EUR", items: [{ sku: "sku_1", quantity: 2, unit_price: "10.00" }] };
const orderJSON = (id: string, version = 1) => JSON.stringify({ id, ...order, status: "draft", total: "20.00", version });
const created = (id: string, replayed = false): Step => ({
  status: 201,
  headers: { "Content-Type": "application/json", ETag: `"1-abc"`, Location: `/v1/orders/${id}`, ...(replayed ? { "Idempotent-Replayed": "true" } : {}) },
  body: orderJSON(id),
});

const servers: FakeAPI[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

/** setup starts a fake API with plan and a client of it whose waits are recorded, not slept. */
async function setup(plan: Step[], cfg: Partial<Config> = {}, last?: Step) {
  const api = await fakeAPI(plan, last);
  servers.push(api);
  const waits: number[] = [];
  const client = new RetrysafeClient({
    baseUrl: api.url,
    token: "sk_test_acme",
    sleep: async (ms) => void waits.push(ms),
    random: () => 0.5,
    ...cfg,
  });
  return { api, client, waits };
}

describe("RetrysafeClient", () => {
  it("creates once through a lost answer: the same ID on every attempt, the replay returned", async () => {
    const id = "0190a6b8-7c1e-7d2a-9b3f-2a4c5e6f7a8b";
    const { api, client, waits } = await setup(["drop", created(id, true)]);
    const { data, response } = await client.api.PUT("/v1/orders/{id}", {
      params: { path: { id }, header: { "If-None-Match": "*" } },
      body: order,
    });
    assert.equal(response.status, 201);
    assert.equal(data?.id, id);
    assert.deepEqual(client.answerOf(response), {
      attempts: 2,
      replayed: true,
      body: new TextEncoder().encode(orderJSON(id)),
      afterUnknownOutcome: true,
    });
    assert.equal(api.seen.length, 2);
    for (const s of api.seen) {
      assert.equal(s.method, "PUT");
      assert.equal(s.url, `/v1/orders/${id}`);
      assert.equal(s.headers["if-none-match"], "*");
      assert.equal(s.headers.authorization, "Bearer sk_test_acme");
      assert.equal(s.body, JSON.stringify(order));
    }
    assert.deepEqual(waits, [50]); // full jitter below the 100 ms base, random 0.5
  });

  it("posts with one key through 503 and 409 request_in_progress, honouring Retry-After", async () => {
    const pay = { status: 201, headers: { "Content-Type": "application/json" }, body: '{"id":"pay_1"}' };
    const { api, client, waits } = await setup([problem(503, "unavailable", "1"), problem(409, "request_in_progress", "2"), pay]);
    const key = await client.idempotencyKey();
    const { data, response } = await client.api.POST("/v1/payments", {
      params: { header: { "Idempotency-Key": key } },
      body: { amount: 4200, currency: "usd", customer: "cus_8812" },
    });
    assert.equal(data?.id, "pay_1");
    assert.equal(client.answerOf(response)?.attempts, 3);
    assert.deepEqual(waits, [1000, 2000]);
    assert.deepEqual(new Set(api.seen.map((s) => s.headers["idempotency-key"])), new Set([key]));
    assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it("returns a final answer at once, with its problem", async () => {
    for (const step of [problem(422, "idempotency_key_reuse"), problem(409, "resource_locked"), problem(409, "currency_mismatch")]) {
      const { api, client } = await setup([step]);
      const { data, error, response } = await client.api.POST("/v1/payments", {
        params: { header: { "Idempotency-Key": "k-1" } },
        body: { amount: 1, currency: "usd", customer: "c" },
      });
      assert.equal(data, undefined);
      assert.equal(error?.code, JSON.parse((step as { body: string }).body).code);
      assert.equal(response.status, (step as { status: number }).status);
      assert.equal(api.seen.length, 1);
    }
  });

  it("reports a 412 after a lost conditional write as an unknown outcome", async () => {
    const id = "0190a6b8-7c1e-7d2a-9b3f-2a4c5e6f7a8b";
    const { api, client } = await setup(["drop", problem(412, "precondition_failed")]);
    const err = await client.api
      .PUT("/v1/orders/{id}", { params: { path: { id }, header: { "If-Match": `"1-abc"` } }, body: order })
      .then(() => assert.fail("no error"), (e: unknown) => e);
    assert.ok(err instanceof RetrysafeError);
    assert.equal(err.status, 412);
    assert.equal(err.code, "precondition_failed");
    assert.equal(err.outcomeKnown, false);
    assert.equal(api.seen.length, 2);
    assert.ok(api.seen.every((s) => s.headers["if-match"] === `"1-abc"`));
  });

  it("stops at maxAttempts with the last answer and an unknown outcome", async () => {
    const { api, client } = await setup([], { maxAttempts: 3 }, problem(503, "unavailable", "1"));
    const err = await client.api.GET("/v1/orders/{id}", { params: { path: { id: "0190a6b8-7c1e-7d2a-9b3f-2a4c5e6f7a8b" } } }).catch((e) => e);
    assert.ok(err instanceof RetrysafeError);
    assert.equal(err.retriesExhausted, true);
    assert.equal(err.status, 503);
    assert.equal(err.outcomeKnown, false);
    assert.equal(err.attempts, 3);
    assert.equal(api.seen.length, 3);
  });

  it("stops before a Retry-After that would end past maxElapsedMs", async () => {
    const { api, client, waits } = await setup([problem(409, "outcome_pending", "120")], { maxElapsedMs: 60_000 });
    const err = await client.api
      .POST("/v1/payments", { params: { header: { "Idempotency-Key": "k-2" } }, body: { amount: 1, currency: "usd", customer: "c" } })
      .catch((e) => e);
    assert.ok(err instanceof RetrysafeError && err.retriesExhausted && !err.outcomeKnown, String(err));
    assert.deepEqual(waits, []);
    assert.equal(api.seen.length, 1);
  });

  it("retries an attempt that times out", async () => {
    const id = "0190a6b8-7c1e-7d2a-9b3f-2a4c5e6f7a8b";
    // Every attempt after the first is answered, in time or not.
    const { api, client } = await setup(["hang"], { attemptTimeoutMs: 200 }, created(id, true));
    const { response } = await client.api.PUT("/v1/orders/{id}", { params: { path: { id }, header: { "If-None-Match": "*" } }, body: order });
    assert.equal(response.status, 201);
    assert.equal(client.answerOf(response)?.replayed, true);
    assert.ok(api.seen.length >= 2);
  });

  it("refreshes the token once on 401", async () => {
    const { api, client } = await setup([problem(401, "unauthenticated"), created("0190a6b8-7c1e-7d2a-9b3f-2a4c5e6f7a8b")], {
      refreshToken: async () => "sk_fresh",
    });
    const id = "0190a6b8-7c1e-7d2a-9b3f-2a4c5e6f7a8b";
    const { response } = await client.api.PUT("/v1/orders/{id}", { params: { path: { id }, header: { "If-None-Match": "*" } }, body: order });
    assert.equal(response.status, 201);
    assert.deepEqual(api.seen.map((s) => s.headers.authorization), ["Bearer sk_test_acme", "Bearer sk_fresh"]);

    const twice = await setup([problem(401, "unauthenticated"), problem(401, "unauthenticated")], { refreshToken: async () => "sk_bad" });
    const { error } = await twice.client.api.GET("/v1/sandbox/charges");
    assert.equal(error?.code, "unauthenticated");
    assert.equal(twice.api.seen.length, 2);
  });

  it("takes a 404 to a DELETE after a lost answer as done", async () => {
    const { client } = await setup(["drop", problem(404, "not_found")]);
    const { response } = await client.api.DELETE("/v1/orders/{id}", { params: { path: { id: "0190a6b8-7c1e-7d2a-9b3f-2a4c5e6f7a8b" } } });
    assert.equal(response.status, 404);
    assert.equal(client.answerOf(response)?.afterUnknownOutcome, true);
  });

  it("stops when the caller aborts, outcome unknown after a lost answer", async () => {
    const abort = new AbortController();
    const { client } = await setup(["drop"], {
      sleep: async () => {
        abort.abort(new Error("caller gave up"));
        throw abort.signal.reason;
      },
    });
    const err = await client.api
      .POST("/v1/payments", { params: { header: { "Idempotency-Key": "k-3" } }, body: { amount: 1, currency: "usd", customer: "c" }, signal: abort.signal })
      .catch((e) => e);
    assert.ok(err instanceof RetrysafeError && !err.outcomeKnown && err.attempts === 1, String(err));
  });

  it("refuses an answer over maxResponseBytes", async () => {
    const { client } = await setup([{ status: 200, headers: { "Content-Type": "application/json" }, body: `"${"x".repeat(100)}"` }], {
      maxResponseBytes: 10,
    });
    const err = await client.api.GET("/v1/sandbox/charges").catch((e) => e);
    assert.ok(err instanceof RetrysafeError && err.outcomeKnown && err.body?.length === 10, String(err));
  });

  it("rejects invalid settings", () => {
    for (const cfg of [{ baseUrl: "/relative" }, { baseUrl: "ftp://x" }, { baseUrl: "http://x", maxAttempts: 0 }, { baseUrl: "http://x", maxDelayMs: 1, baseDelayMs: 2 }]) {
      assert.throws(() => new RetrysafeClient(cfg as Config), RangeError, JSON.stringify(cfg));
    }
  });
});

/** memoryStorage is a Web Storage area in memory, as localStorage is in a browser. */
function memoryStorage(): Storage {
  const m = new Map<string, string>();
  return {
    get length() {
      return m.size;
    },
    clear: () => m.clear(),
    getItem: (k) => m.get(k) ?? null,
    key: (i) => [...m.keys()][i] ?? null,
    removeItem: (k) => void m.delete(k),
    setItem: (k, v) => void m.set(k, String(v)),
  };
}

describe("keys", () => {
  it("makes an operation's ID once and keeps it, in memory or in Web Storage", async () => {
    for (const keyStore of [new MemoryKeyStore(), new WebStorageKeyStore(memoryStorage())]) {
      const client = new RetrysafeClient({ baseUrl: "http://127.0.0.1:1", keyStore });
      const id = await client.resourceId("checkout-1");
      assert.equal(await client.resourceId("checkout-1"), id);
      assert.equal(await new RetrysafeClient({ baseUrl: "http://127.0.0.1:1", keyStore }).resourceId("checkout-1"), id);
      await assert.rejects(client.resourceId("checkout-1", "0190a6b8-7c1e-7d2a-9b3f-2a4c5e6f7a8b"), /already bound/);
      await client.forget("checkout-1");
      assert.notEqual(await client.resourceId("checkout-1"), id);
      assert.notEqual(await client.resourceId(), await client.resourceId());
    }
  });

  it("refuses a stored key older than the replay window", async () => {
    let now = Date.UTC(2030, 0, 1);
    const client = new RetrysafeClient({ baseUrl: "http://127.0.0.1:1", keyStore: new MemoryKeyStore(), now: () => now });
    const key = await client.idempotencyKey("pay-1042");
    now += 24 * 60 * 60 * 1000 - 1;
    assert.equal(await client.idempotencyKey("pay-1042"), key);
    now += 1;
    await assert.rejects(client.idempotencyKey("pay-1042"), KeyExpiredError);
    assert.notEqual(await client.resourceId("pay-1042").catch(() => "refused"), "refused"); // an ID does not expire
  });

  it("validates keys and IDs", async () => {
    const client = new RetrysafeClient({ baseUrl: "http://127.0.0.1:1", uuidVersion: 4 });
    assert.match(await client.idempotencyKey(), /^[0-9a-f-]{14}4/);
    assert.equal(await client.idempotencyKey(undefined, "pay:1042_a.b-c"), "pay:1042_a.b-c");
    for (const bad of ["", "a b", "x".repeat(256), "ключ"]) await assert.rejects(client.idempotencyKey(undefined, bad), /idempotency key/);
    for (const bad of ["nope", "00000000-0000-0000-0000-000000000000"]) await assert.rejects(client.resourceId(undefined, bad), /not a resource ID/);
  });
});
