// Package infra holds fluidbox's infrastructure definitions that are not the
// SAM template itself (state machine definitions as *.asl.json, later), and
// the tests that keep ../template.yaml and ../docs/openapi.yaml honest:
//
//   - the template parses with goformation and validates against the SAM
//     JSON schema bundled with it, compiled offline;
//   - every function is provided.al2023 on arm64 with handler bootstrap, is
//     built from functions/<name>/main.go, and holds only the IAM actions its
//     privilege split allows (no wildcards, kms:Decrypt only in the broker);
//   - the route table (shared/api/route.Table) and the template's Api events
//     agree both ways, each route on the function the table names; the
//     function URL carries exactly the table's function-URL rows;
//   - the route table, docs/openapi.yaml and docs/api.md agree both ways
//     (a route documented but not served fails, and the reverse);
//   - no function links a package its privilege forbids (go list -deps:
//     the gate links no MCP, OIDC or KMS code).
//
// Placeholders is how those tests, and the role check the table tests run
// under (shared/internal/ddbchaos/roles), read the template's intrinsics.
//
// `make validate` runs `go test ./infra/...`.
package infra
