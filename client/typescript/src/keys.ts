/**
 * Resource IDs and idempotency keys: made once per logical operation, and
 * kept in a KeyStore before the first request when the operation must
 * survive a restart or a page reload.
 */
import { v4, v7, validate as isUUID } from "uuid";

/** newId returns a new UUID: version 7 (time-ordered) or 4 (random). */
export function newId(version: 4 | 7 = 7): string {
  return version === 4 ? v4() : v7();
}

/** The longest idempotency key a retrysafe API accepts. */
export const maxKeyLength = 255;

/** InvalidKeyError: a key that a retrysafe API would refuse with 400 idempotency_key_invalid. */
export class InvalidKeyError extends Error {
  override name = "InvalidKeyError";
}

/** validateKey throws an InvalidKeyError unless key has 1 to 255 characters of [A-Za-z0-9._:-]. */
export function validateKey(key: string): void {
  if (key === "") throw new InvalidKeyError("the idempotency key is empty");
  if (key.length > maxKeyLength) throw new InvalidKeyError(`the idempotency key has ${key.length} characters, more than ${maxKeyLength}`);
  if (!/^[A-Za-z0-9._:-]+$/.test(key)) throw new InvalidKeyError("the idempotency key may hold only A-Z a-z 0-9 . _ : -");
}

/** validateId throws unless id is a UUID other than the nil UUID. */
export function validateId(id: string): void {
  if (!isUUID(id) || /^[0-]+$/.test(id)) throw new InvalidKeyError(`${JSON.stringify(id)} is not a resource ID (a UUID)`);
}

/** What a KeyStore keeps per operation. */
export interface StoredKey {
  /** The idempotency key, or the resource ID of a create. */
  key: string;
  /** When the client saved it, before its first request (milliseconds since the epoch; 0: unknown, never expired). */
  savedAt: number;
}

/**
 * KeyStore persists the key (or resource ID) of a logical operation, named
 * by the caller ("checkout-1042"), so that a process or page that starts
 * again in the middle of it sends the same key and gets the original
 * result instead of a second effect. save must not resolve before the key
 * would survive the restart.
 */
export interface KeyStore {
  load(operation: string): Promise<StoredKey | undefined>;
  save(operation: string, key: StoredKey): Promise<void>;
  delete(operation: string): Promise<void>;
}

/** MemoryKeyStore keeps keys for the life of the process: across retries and calls, not restarts. */
export class MemoryKeyStore implements KeyStore {
  readonly #keys = new Map<string, StoredKey>();
  async load(operation: string): Promise<StoredKey | undefined> {
    return this.#keys.get(operation);
  }
  async save(operation: string, key: StoredKey): Promise<void> {
    this.#keys.set(operation, { ...key });
  }
  async delete(operation: string): Promise<void> {
    this.#keys.delete(operation);
  }
}

/**
 * WebStorageKeyStore keeps keys in a Web Storage area, localStorage by
 * default, so that a browser page that is reloaded in the middle of an
 * operation resumes it with the same ID or key.
 */
export class WebStorageKeyStore implements KeyStore {
  constructor(
    private readonly storage: Storage = globalThis.localStorage,
    private readonly prefix = "retrysafe:",
  ) {}
  async load(operation: string): Promise<StoredKey | undefined> {
    const raw = this.storage.getItem(this.prefix + operation);
    if (raw === null) return undefined;
    const rec = JSON.parse(raw) as Partial<StoredKey>;
    if (typeof rec.key !== "string") throw new Error(`retrysafe: key store: corrupt entry for ${JSON.stringify(operation)}`);
    return { key: rec.key, savedAt: typeof rec.savedAt === "number" ? rec.savedAt : 0 };
  }
  async save(operation: string, key: StoredKey): Promise<void> {
    this.storage.setItem(this.prefix + operation, JSON.stringify({ key: key.key, savedAt: key.savedAt }));
  }
  async delete(operation: string): Promise<void> {
    this.storage.removeItem(this.prefix + operation);
  }
}

/**
 * KeyExpiredError: the key stored for an operation is older than the
 * server's replay window. The server no longer remembers it and would run
 * the operation again, so it is not sent: find out whether the operation
 * took effect, then forget the operation before starting over.
 */
export class KeyExpiredError extends Error {
  override name = "KeyExpiredError";
  constructor(
    readonly operation: string,
    readonly key: string,
    readonly ageMs: number,
    readonly replayWindowMs: number,
  ) {
    super(
      `retrysafe: the key of operation ${JSON.stringify(operation)} was saved ${Math.round(ageMs / 1000)} s ago, ` +
        `beyond the server's replay window (${Math.round(replayWindowMs / 1000)} s): the server would run the operation again; ` +
        "find out whether it took effect, then forget it",
    );
  }
}
