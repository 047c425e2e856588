// Package infra holds fluidbox's infrastructure definitions that are not the
// SAM template itself (state machine definitions as *.asl.json, later), and
// the tests that keep ../template.yaml and ../docs/openapi.yaml honest:
//
//   - the template parses with goformation and validates against the SAM
//     JSON schema bundled with it, compiled offline;
//   - every function is provided.al2023 on arm64 with handler bootstrap, is
//     built from functions/<name>/main.go, and holds only the IAM actions its
//     privilege split allows (no wildcards, kms:Decrypt only in the broker);
//   - every HTTP route in the template is documented in docs/openapi.yaml,
//     and that document covers every path of the API contract (API.md).
//
// `make validate` runs `go test ./infra/...`.
package infra
