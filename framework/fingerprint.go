package framework

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// FingerprintVersion is the version of the fingerprint algorithm. It is part
// of every fingerprint, so a change of the algorithm never makes an old
// request look like a new one with the same hash.
const FingerprintVersion = 1

// fingerprintInput is what identifies one request: the validated command
// and the context it applies to. Authorization, the idempotency key, trace
// and request-ID headers are deliberately absent.
type fingerprintInput struct {
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

// FingerprintPrefix returns the 12-hex-digit prefix of a fingerprint in
// its stored form ("v1:<64 hex digits>"), what the request logs of both
// patterns carry; a value of another form is returned as it is.
func FingerprintPrefix(stored string) string {
	if _, sum, ok := strings.Cut(stored, ":"); ok && len(sum) >= 12 {
		return sum[:12]
	}
	return stored
}

// semanticHeaders picks the values of the named headers from h, keyed by
// canonical name, for fingerprintInput.Headers; nil when none is set.
func semanticHeaders(h http.Header, names []string) map[string]string {
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

// computeFingerprint canonicalizes in and hashes it with SHA-256: the
// request's fingerprint in its stored form, "v1:<64 hex digits>" (the
// algorithm's version, [FingerprintVersion], and the hash).
//
// The hashed envelope is {"v":…,"tenant":…,"op":…,"path":{…},"headers":{…},
// "command":<canonical command>}, exactly as json.Marshal writes that
// struct (path and headers omitted when empty, map keys sorted); it is
// written straight into one pooled buffer, with no second encoding.
func computeFingerprint(in fingerprintInput) (string, error) {
	command, err := json.Marshal(in.Command)
	if err != nil {
		return "", err
	}
	if len(in.Volatile) > 0 {
		if command, err = dropPaths(command, in.Volatile); err != nil {
			return "", err
		}
	}
	bp := envelopePool.Get().(*[]byte)
	defer envelopePool.Put(bp)
	buf := append((*bp)[:0], `{"v":`...)
	buf = strconv.AppendInt(buf, FingerprintVersion, 10)
	buf = append(buf, `,"tenant":`...)
	buf = appendJSONString(buf, in.Tenant)
	buf = append(buf, `,"op":`...)
	buf = appendJSONString(buf, in.Operation)
	if len(in.PathParams) > 0 {
		buf = appendJSONStringMap(append(buf, `,"path":`...), in.PathParams)
	}
	if len(in.Headers) > 0 {
		buf = appendJSONStringMap(append(buf, `,"headers":`...), in.Headers)
	}
	buf = append(buf, `,"command":`...)
	if buf, err = appendCanonical(buf, command); err != nil {
		return "", err
	}
	buf = append(buf, '}')
	sum := sha256.Sum256(buf)
	// The stored form, written over the envelope, which is hashed.
	buf = strconv.AppendInt(append(buf[:0], 'v'), FingerprintVersion, 10)
	buf = hex.AppendEncode(append(buf, ':'), sum[:])
	*bp = buf
	return string(buf), nil
}

// envelopePool recycles the buffers fingerprints are written into.
var envelopePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// appendJSONStringMap appends m as json.Marshal writes a map[string]string.
func appendJSONStringMap(dst []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(appendJSONString(dst, k), ':')
		dst = appendJSONString(dst, m[k])
	}
	return append(dst, '}')
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
