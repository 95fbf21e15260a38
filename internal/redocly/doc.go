// Package redocly lints an OpenAPI document in tests with the real linter,
// Redocly CLI (npm install -g @redocly/cli), and its recommended rules.
// Without the redocly binary on PATH the test is skipped, or fails under
// CI (CI set), where .ci/run installs it. [Lint] fails the test on each
// [Problem] beyond the warnings it allows.
package redocly
