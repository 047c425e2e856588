// Package policyyaml reads a policy document as an operator writes it, in
// YAML or JSON: what the control API's policy routes and the CLI accept.
//
// What it guarantees:
//
//   - A YAML document compiles exactly as the JSON it converts to: same
//     validation, warnings, normalized document and digest as policy.Parse
//     gives that JSON. The conversion is strict (sigs.k8s.io/yaml): a
//     duplicate key is invalid.
//   - A document that starts with '{' is JSON and is read by policy.Parse
//     unchanged, as is one over policy.MaxDocumentBytes or empty (refused
//     there).
//   - Errors are *policy.ValidationError in the parser's own words, never
//     naming a Go type.
//
// It is a package of its own because every stored policy is JSON: the
// functions that only read stored policies (the gate among them) link
// package policy without a YAML parser.
package policyyaml

import (
	"bytes"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/fluidbox/fluidbox/shared/policy"
)

// Parse reads, validates and compiles a policy document in YAML or JSON.
// Errors are as policy.Parse's, plus "invalid YAML" for text the YAML
// parser refuses.
func Parse(data []byte) (*policy.Policy, []policy.Warning, error) {
	trimmed := bytes.TrimSpace(data)
	if len(data) > policy.MaxDocumentBytes || len(trimmed) == 0 || trimmed[0] == '{' {
		return policy.Parse(data)
	}
	js, err := yaml.YAMLToJSONStrict(trimmed)
	if err != nil {
		return nil, nil, &policy.ValidationError{Message: "invalid YAML: " + reason(err)}
	}
	return policy.Parse(js)
}

// reason is a YAML parser's error in its own words, unless those name Go
// types (an invalid map key is reported as the Go map it became), in which
// case only the line is kept.
func reason(err error) string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	for _, goWord := range []string{"map[", "interface {", "struct", "[]", "!!", "%!", "<nil>", "of type"} {
		if strings.Contains(msg, goWord) {
			if m := lineNumber.FindString(msg); m != "" {
				return "the document is not a mapping of plain keys to values at " + m
			}
			return "the document is not a mapping of plain keys to values"
		}
	}
	return msg
}

var lineNumber = regexp.MustCompile(`line \d+`)
