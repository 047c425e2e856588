// Package infra holds fluidbox's infrastructure definitions that are not the
// SAM template itself (state machine definitions as *.asl.json, later), and
// the tests that keep ../template.yaml and ../docs/openapi.yaml honest:
//
//   - the template parses with goformation and validates against the SAM
//     JSON schema bundled with it, compiled offline;
//   - every function is provided.al2023 on arm64 with handler bootstrap, is
//     built from functions/<name>/main.go, and holds only the IAM actions its
//     privilege split allows (no wildcards, kms:Decrypt only in the broker);
//   - docs/openapi.yaml's paths, the template's Api events and docs/api.md's
//     route index are what the route rows (shared/api.Surface) generate now
//     (`go generate ./shared/api`), and read back they agree with the rows
//     both ways, each route on the function its row names; the function URL
//     carries exactly the function-URL rows; docs/api.md's prose names
//     every documented route;
//   - no function links a package its privilege forbids (go list -deps, as
//     built for Lambda: the gate links no MCP, OIDC or KMS code; control no
//     model proxy, OAuth token exchange, MCP client or KMS).
//
// Placeholders is how those tests, and the role check the table tests run
// under (shared/internal/ddbchaos/roles), read the template's intrinsics.
//
// `make validate` runs `go test ./infra/...`.
package infra
