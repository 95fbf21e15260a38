/**
 * The generic problem codes of the retrysafe wire contract: the status each
 * is answered with and whether a retry with the same ID or key may succeed.
 * This is a copy of the table in the Go module's wire/code.go; a Go test
 * (tests/typescript_test.go) keeps the two equal. A service adds business
 * codes of its own (a payment's card_declined); the client judges a code it
 * does not know by the answer's status and Retry-After.
 */
export interface CodeInfo {
  readonly status: number;
  readonly retryable: boolean;
}

export const genericCodes: Readonly<Record<string, CodeInfo>> = {
  malformed_json: { status: 400, retryable: false },
  validation_failed: { status: 400, retryable: false },
  invalid_resource_id: { status: 400, retryable: false },
  idempotency_key_missing: { status: 400, retryable: false },
  idempotency_key_invalid: { status: 400, retryable: false },
  unauthenticated: { status: 401, retryable: false },
  not_found: { status: 404, retryable: false },
  method_not_allowed: { status: 405, retryable: false },
  request_in_progress: { status: 409, retryable: true },
  outcome_pending: { status: 409, retryable: true },
  resource_locked: { status: 409, retryable: false },
  resource_deleted: { status: 410, retryable: false },
  precondition_failed: { status: 412, retryable: false },
  precondition_required: { status: 428, retryable: false },
  payload_too_large: { status: 413, retryable: false },
  unsupported_media_type: { status: 415, retryable: false },
  idempotency_key_reuse: { status: 422, retryable: false },
  too_many_requests: { status: 429, retryable: true },
  internal: { status: 500, retryable: false },
  unavailable: { status: 503, retryable: true },
};

/** lookupGeneric returns the description of a generic code, or undefined. */
export function lookupGeneric(code: string): CodeInfo | undefined {
  return Object.hasOwn(genericCodes, code) ? genericCodes[code] : undefined;
}
