// The browser test's page: creates one order with the client. Its ID is
// made once and kept in localStorage until the outcome is known, so a
// reload in the middle of the retries sends the same ID again.
import { RetrysafeClient, RetrysafeError, WebStorageKeyStore } from "../../src/index.js";

const show = (id: string, text: string) => {
  document.getElementById(id)!.textContent = text;
};

const client = new RetrysafeClient({
  baseUrl: location.origin,
  token: new URLSearchParams(location.search).get("token") ?? "",
  keyStore: new WebStorageKeyStore(localStorage, "retrysafe-demo:"),
  onAttempt: (e) => {
    show("attempts", String(e.attempt));
    show("last", e.error !== undefined ? `no answer (${e.decision})` : `${e.status} ${e.code} (${e.decision})`);
  },
});

const id = await client.resourceId("checkout");
show("id", id);
try {
  const { response } = await client.api.PUT("/v1/orders/{id}", {
    params: { path: { id }, header: { "If-None-Match": "*" } },
    body: { customer: "cus_browser", currency: "EUR", items: [{ sku: "sku_1", quantity: 1, unit_price: "9.90" }] },
  });
  const answer = client.answerOf(response)!;
  // The outcome is known (and shown): the next checkout is a new order.
  await client.forget("checkout");
  show(
    "result",
    JSON.stringify({
      id,
      status: response.status,
      replayed: answer.replayed,
      attempts: answer.attempts,
      body: btoa(String.fromCharCode(...answer.body)),
    }),
  );
} catch (err) {
  // Outcome unknown: keep the ID; the next load retries it.
  show("result", JSON.stringify({ id, error: err instanceof RetrysafeError ? err.message : String(err) }));
}
