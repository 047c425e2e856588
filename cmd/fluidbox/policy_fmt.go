package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/policy/policyyaml"
)

const policyFmtUsage = "policy fmt [--check] FILE..."

// policyFmt rewrites policy documents in their canonical layout: JSON
// indented by two spaces, YAML as a YAML 1.2 encoder writes it with an
// indent of two (comments, key order and flow or block style kept). Only
// white space and quoting change, never meaning: a document that is not
// valid is refused, and a rewrite that would not read back to the same
// digest is not written. With --check nothing is written; the files that
// are not canonical are listed and the exit status is 1 (for CI). "-"
// reads stdin and writes stdout.
func policyFmt(args []string, e cmdEnv) error {
	fs := newFlagSet("policy fmt", e.stderr, policyFmtUsage)
	check := fs.Bool("check", false, "write nothing; list the files that are not canonical and exit 1 if any is")
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("one or more policy files are needed (- for stdin)")
	}
	var unformatted []string
	for _, name := range files {
		data, err := readInput(name, e.stdin, policy.MaxDocumentBytes)
		if err != nil {
			return err
		}
		out, err := canonicalPolicy(data)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		switch {
		case name == "-" && !*check:
			if _, err := e.stdout.Write(out); err != nil {
				return err
			}
		case bytes.Equal(out, data):
		case *check:
			unformatted = append(unformatted, name)
			fmt.Fprintln(e.stdout, name)
		default:
			if err := writeFileAtomic(name, out); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, name)
		}
	}
	if len(unformatted) > 0 {
		return fmt.Errorf("%d of %d files are not formatted: run fluidbox policy fmt %s", len(unformatted), len(files), strings.Join(unformatted, " "))
	}
	return nil
}

// canonicalPolicy is a valid policy document in its canonical layout, in
// the language it is written in (a document that starts with '{' is JSON).
func canonicalPolicy(data []byte) ([]byte, error) {
	p, _, err := policyyaml.Parse(data)
	if err != nil {
		return nil, err
	}
	var out []byte
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		var b bytes.Buffer
		if err := json.Indent(&b, t, "", "  "); err != nil {
			return nil, err
		}
		out = append(b.Bytes(), '\n')
	} else {
		var n yaml.Node
		if err := yaml.Unmarshal(data, &n); err != nil {
			return nil, err
		}
		if out, err = encodeYAML(&n); err != nil {
			return nil, err
		}
	}
	q, _, err := policyyaml.Parse(out)
	if err != nil || q.Digest() != p.Digest() {
		return nil, fmt.Errorf("the canonical layout would not read back as the same document, so it is left as it is")
	}
	return out, nil
}

// policyYAML writes a policy document given as JSON in YAML's block
// style, its keys in the same order, and refuses a result that would not
// read back to the same document.
func policyYAML(doc []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(doc, &n); err != nil { // JSON is YAML
		return nil, err
	}
	blockStyle(&n)
	out, err := encodeYAML(&n)
	if err != nil {
		return nil, err
	}
	p, _, err := policyyaml.Parse(doc)
	if err != nil {
		return nil, err
	}
	if q, _, err := policyyaml.Parse(out); err != nil || q.Digest() != p.Digest() {
		return nil, fmt.Errorf("the document does not read back the same as YAML; write it as JSON")
	}
	return out, nil
}

// encodeYAML writes a YAML node as the YAML 1.2 encoder does with an
// indent of two: the one canonical layout.
func encodeYAML(n *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// blockStyle clears every node's style, so the encoder writes block
// collections and quotes a string only where YAML needs it.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// writeFileAtomic replaces name with data through a temporary file in the
// same directory, keeping the file's mode: a crash leaves the old file or
// the new one, never half of either.
func writeFileAtomic(name string, data []byte) error {
	info, err := os.Stat(name)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), ".fluidbox-fmt-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(info.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
