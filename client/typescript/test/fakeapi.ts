/** A scripted HTTP server for the client's unit tests: each request gets the next step of a plan. */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A step answers a request, or loses its answer ("drop": the connection closes without a byte), or withholds it until the next request arrives ("hang"). */
export type Step = "drop" | "hang" | { status: number; headers?: Record<string, string>; body?: string };

export function problem(status: number, code: string, retryAfter?: string): Step {
  const headers: Record<string, string> = { "Content-Type": "application/problem+json" };
  if (retryAfter !== undefined) headers["Retry-After"] = retryAfter;
  return { status, headers, body: JSON.stringify({ type: `urn:retrysafe:problem:${code}`, title: code, status, code }) };
}

export interface FakeAPI {
  url: string;
  seen: Seen[];
  close(): Promise<void>;
}

/** fakeAPI serves plan in order; once it is used up, every request gets last. */
export async function fakeAPI(plan: Step[], last: Step = { status: 500 }): Promise<FakeAPI> {
  const seen: Seen[] = [];
  const hanging: (() => void)[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      for (const release of hanging.splice(0)) release();
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString() });
      const step = plan.shift() ?? last;
      if (step === "drop") {
        req.socket.destroy();
      } else if (step === "hang") {
        hanging.push(() => req.socket.destroy());
      } else {
        res.writeHead(step.status, step.headers ?? {});
        res.end(step.body ?? "");
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        for (const release of hanging.splice(0)) release();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
