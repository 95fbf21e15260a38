package framework

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// FingerprintVersion is the version of the fingerprint algorithm. It is part
// of every fingerprint, so a change of the algorithm never makes an old
// request look like a new one with the same hash.
const FingerprintVersion = 1

// FingerprintInput is what identifies one request: the validated command and
// the context it applies to. Authorization, the idempotency key, trace and
// request-ID headers are deliberately absent.
type FingerprintInput struct {
	Tenant    string
	Operation string
	// PathParams are the request's path parameters, e.g. {"id": "…"}.
	PathParams map[string]string
	// Headers holds the values of the headers the operation declares
	// semantic (an API version header, say), keyed by canonical name.
	Headers map[string]string
	// Command is the bound, defaulted, validated and normalized command.
	Command any
	// Volatile lists dotted JSON paths ("meta.trace", "note") of command
	// fields left out of the fingerprint.
	Volatile []string
}

// Fingerprint is the SHA-256 of a request's canonical form, with the
// algorithm version it was computed by.
type Fingerprint struct {
	Version int
	Sum     [sha256.Size]byte
}

// String returns the stored form "v1:<64 hex digits>".
func (f Fingerprint) String() string {
	return "v" + strconv.Itoa(f.Version) + ":" + hex.EncodeToString(f.Sum[:])
}

// Short returns a 12-hex-digit prefix for logs.
func (f Fingerprint) Short() string { return hex.EncodeToString(f.Sum[:6]) }

// SemanticHeaders picks the values of the named headers from h, keyed by
// canonical name, for [FingerprintInput.Headers]; nil when none is set.
func SemanticHeaders(h http.Header, names []string) map[string]string {
	var out map[string]string
	for _, name := range names {
		if v := h.Get(name); v != "" {
			if out == nil {
				out = map[string]string{}
			}
			out[http.CanonicalHeaderKey(name)] = v
		}
	}
	return out
}

// ComputeFingerprint canonicalizes in and hashes it with SHA-256.
func ComputeFingerprint(in FingerprintInput) (Fingerprint, error) {
	raw, err := json.Marshal(in.Command)
	if err != nil {
		return Fingerprint{}, err
	}
	if len(in.Volatile) > 0 {
		if raw, err = dropPaths(raw, in.Volatile); err != nil {
			return Fingerprint{}, err
		}
	}
	command, err := CanonicalJSON(raw)
	if err != nil {
		return Fingerprint{}, err
	}
	envelope, err := json.Marshal(struct {
		Version   int               `json:"v"`
		Tenant    string            `json:"tenant"`
		Operation string            `json:"op"`
		Path      map[string]string `json:"path,omitempty"`
		Headers   map[string]string `json:"headers,omitempty"`
		Command   json.RawMessage   `json:"command"`
	}{FingerprintVersion, in.Tenant, in.Operation, in.PathParams, in.Headers, command})
	if err != nil {
		return Fingerprint{}, err
	}
	// encoding/json sorts map keys, so the envelope is canonical too.
	return Fingerprint{Version: FingerprintVersion, Sum: sha256.Sum256(envelope)}, nil
}

// dropPaths removes the dotted object paths from a JSON document.
func dropPaths(raw []byte, paths []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	for _, p := range paths {
		parts := strings.Split(p, ".")
		node := doc
		for i, part := range parts {
			obj, ok := node.(map[string]any)
			if !ok {
				break
			}
			if i == len(parts)-1 {
				delete(obj, part)
				break
			}
			node = obj[part]
		}
	}
	return json.Marshal(doc)
}
