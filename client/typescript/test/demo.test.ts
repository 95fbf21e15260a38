// The client against the demo API behind a proxy that loses answers after
// the server committed. tests/typescript_test.go starts the demo and the
// proxies, runs this file with their URLs, then counts in the database what
// each logical operation did and compares the answers with the ones the
// server first gave; this file checks what the client saw and reports it.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { after, describe, it } from "node:test";

import { RetrysafeClient, type AnswerInfo } from "../src/index.js";

/** A proxy of the demo: it loses the first `dropped` answers of every write, or stands for the slow provider. */
interface Scenario {
  name: string;
  url: string;
  dropped: number;
  slowProvider: boolean;
}

/** What one logical operation got, for the Go test. */
interface Report {
  scenario: string;
  op: "create" | "replace" | "patch" | "pay";
  method: string;
  path: string;
  id: string;
  key: string;
  status: number;
  replayed: boolean;
  attempts: number;
  body: string; // base64
}

const env = process.env;
const scenarios: Scenario[] = env.RETRYSAFE_SCENARIOS ? JSON.parse(env.RETRYSAFE_SCENARIOS) : [];
const skip = scenarios.length === 0 && "RETRYSAFE_SCENARIOS is not set: tests/typescript_test.go runs this file against the demo";
const reports: Report[] = [];
after(() => {
  if (env.RETRYSAFE_REPORT) writeFileSync(env.RETRYSAFE_REPORT, JSON.stringify(reports));
});

const order = (quantity: number) => ({
  customer: "cus_ts",
  currency: "EUR",
  items: [{ sku: "sku_1", quantity, unit_price: "10.00" }],
});

function record(sc: Scenario, op: Report["op"], method: string, path: string, ids: { id?: string; key?: string }, response: Response, info: AnswerInfo) {
  reports.push({
    scenario: sc.name,
    op,
    method,
    path,
    id: ids.id ?? "",
    key: ids.key ?? "",
    status: response.status,
    replayed: info.replayed,
    attempts: info.attempts,
    body: Buffer.from(info.body).toString("base64"),
  });
}

describe("the demo through a lost-answer proxy", { skip }, () => {
  const token = env.RETRYSAFE_TOKEN ?? "";
  // Setup writes go straight to the demo; only the operation under test crosses the proxy.
  const direct = new RetrysafeClient({ baseUrl: env.RETRYSAFE_DIRECT ?? "http://127.0.0.1:1", token });

  /** draft creates an order without faults and returns its ID and ETag. */
  async function draft(): Promise<{ id: string; etag: string }> {
    const id = await direct.resourceId();
    const { response } = await direct.api.PUT("/v1/orders/{id}", { params: { path: { id }, header: { "If-None-Match": "*" } }, body: order(2) });
    assert.equal(response.status, 201);
    return { id, etag: response.headers.get("ETag") ?? "" };
  }

  for (const sc of scenarios) {
    describe(sc.name, () => {
      // Short waits where the server names none (its Retry-After is honoured
      // as it is), and attempts that a loaded machine does not time out: the
      // lost answers are the proxy's, and counted.
      const client = new RetrysafeClient({ baseUrl: sc.url, token, baseDelayMs: 10, maxDelayMs: 100, attemptTimeoutMs: 60_000, maxElapsedMs: 180_000 });
      const noProvider = sc.slowProvider && "no provider call in this operation";

      /** answered checks what the retry loop says of an answer: replayed after a lost one, one attempt per lost answer and one more. */
      function answered(response: Response): AnswerInfo {
        const info = client.answerOf(response);
        assert.ok(info, "the answer did not come through the retry loop");
        if (sc.dropped > 0) {
          assert.equal(info.attempts, sc.dropped + 1, "attempts");
          assert.equal(info.replayed, true, "Idempotent-Replayed");
        }
        return info;
      }

      it("create: one ID on every attempt", { skip: noProvider }, async () => {
        const id = await client.resourceId();
        const { data, response } = await client.api.PUT("/v1/orders/{id}", {
          params: { path: { id }, header: { "If-None-Match": "*" } },
          body: order(2),
        });
        assert.equal(response.status, 201);
        assert.equal(data?.id, id);
        assert.equal(data?.version, 1);
        record(sc, "create", "PUT", `/v1/orders/${id}`, { id }, response, answered(response));
      });

      it("replace: If-Match with the ETag read, converging after a lost answer", { skip: noProvider }, async () => {
        const { id, etag } = await draft();
        const { data, response } = await client.api.PUT("/v1/orders/{id}", {
          params: { path: { id }, header: { "If-Match": etag } },
          body: order(3),
        });
        assert.equal(response.status, 200);
        assert.equal(data?.version, 2);
        assert.equal(data?.items[0].quantity, 3);
        record(sc, "replace", "PUT", `/v1/orders/${id}`, { id }, response, answered(response));
      });

      it("patch: a merge patch with If-Match, converging after a lost answer", { skip: noProvider }, async () => {
        const { id, etag } = await draft();
        const { data, response } = await client.api.PATCH("/v1/orders/{id}", {
          params: { path: { id }, header: { "If-Match": etag } },
          headers: { "Content-Type": "application/merge-patch+json" },
          body: { note: "ring twice" },
        });
        assert.equal(response.status, 200);
        assert.equal(data?.version, 2);
        assert.equal(data?.note, "ring twice");
        record(sc, "patch", "PATCH", `/v1/orders/${id}`, { id }, response, answered(response));
      });

      it("pay: one Idempotency-Key on every attempt", async () => {
        const key = await client.idempotencyKey();
        const { data, response } = await client.api.POST("/v1/payments", {
          params: { header: { "Idempotency-Key": key } },
          body: {
            amount: 4200,
            currency: "usd",
            customer: "cus_8812",
            description: `ts ${key}`, // names the payment's charges in the sandbox, for the Go test to count
            payment_method: sc.slowProvider ? "pm_card_timeout_after_charge" : "pm_card_visa",
          },
        });
        assert.equal(response.status, 201);
        assert.equal(data?.status, "succeeded");
        assert.ok(data?.provider_charge_id);
        const info = sc.slowProvider ? client.answerOf(response)! : answered(response);
        record(sc, "pay", "POST", "/v1/payments", { key }, response, info);
      });
    });
  }
});
