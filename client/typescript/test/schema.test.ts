import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));

// openapi.json is the demo's document (tests/typescript_test.go keeps it
// current); src/schema.ts must be what openapi-typescript makes of it.
it("src/schema.ts is generated from openapi.json (npm run generate)", () => {
  const dir = mkdtempSync(join(tmpdir(), "retrysafe-schema-"));
  try {
    const out = join(dir, "schema.ts");
    execFileSync(process.execPath, [join(root, "node_modules/openapi-typescript/bin/cli.js"), join(root, "openapi.json"), "-o", out], {
      stdio: "pipe",
    });
    assert.ok(
      readFileSync(out, "utf8") === readFileSync(join(root, "src/schema.ts"), "utf8"),
      "src/schema.ts is not what openapi-typescript makes of openapi.json: run npm run generate in client/typescript",
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
