package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/policy/policyyaml"
)

// storedPolicy is a policy version as GET /v1/policies/{id} answers it.
type storedPolicy struct {
	ID        string          `json:"id"`
	Version   int             `json:"version"`
	Name      string          `json:"name"`
	Digest    string          `json:"digest"`
	Document  json.RawMessage `json:"document"`
	CreatedAt string          `json:"created_at"`
	UpdatedAt string          `json:"updated_at"`
	Warnings  []string        `json:"warnings"`
}

// policyWrite is `policy create -f FILE` (POST /v1/policies) and `policy
// update ID -f FILE` (PUT /v1/policies/{id}, the next version). The file,
// JSON or YAML, is checked offline first, as `policy test` checks it, so
// an invalid document or a failing test is reported before anything is
// sent; the control plane checks it again and is the one that decides.
func policyWrite(ctx context.Context, sub string, args []string, e cmdEnv) error {
	syn := map[string]string{"create": "policy create -f FILE [--json]", "update": "policy update POLICY_ID -f FILE [--json]"}[sub]
	fs := newFlagSet("policy "+sub, e.stderr, syn)
	f := addAPIFlags(fs, e.getenv)
	file := fs.String("f", "", "the policy document, JSON or YAML (- for stdin)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	want := map[string]int{"create": 0, "update": 1}[sub]
	if len(pos) != want {
		return usagef("usage: fluidbox %s", syn)
	}
	if *file == "" {
		return usagef("-f FILE is required: the policy document, JSON or YAML")
	}
	doc, err := readPolicyFile(*file, e.stdin)
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	method, path := "POST", "/v1/policies"
	if sub == "update" {
		method, path = "PUT", path+"/"+url.PathEscape(pos[0])
	}
	var p storedPolicy
	if done, err := fetch(ctx, c, f.outFlags, e.stdout, method, path, doc, &p, "a policy"); done {
		return err
	}
	return printPolicy(e.stdout, p, false)
}

// readPolicyFile reads a policy document (JSON or YAML) from a file or
// stdin ("-"), checks it as the control plane will (parse, validation, its
// tests) and returns it as the JSON the control plane stores.
func readPolicyFile(name string, stdin io.Reader) (json.RawMessage, error) {
	data, err := readInput(name, stdin, policy.MaxDocumentBytes)
	if err != nil {
		return nil, err
	}
	p, _, err := policyyaml.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if failures := p.RunTests(); len(failures) > 0 {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%s: %d of %d tests failed (nothing sent):", name, len(failures), len(p.Document().Tests))
		for _, f := range failures {
			fmt.Fprintf(&b, "\n  %s", f)
		}
		return nil, fmt.Errorf("%s", b.String())
	}
	// The document as parsed, in JSON: what the control plane stores.
	return json.Marshal(p.Document())
}

// policyGet is `policy get POLICY_ID [--version N]`: the version's header
// and its document.
func policyGet(ctx context.Context, args []string, e cmdEnv) error {
	const syn = "policy get POLICY_ID [--version N] [--json]"
	fs := newFlagSet("policy get", e.stderr, syn)
	f := addAPIFlags(fs, e.getenv)
	version := fs.Int("version", 0, "a policy version (default: the latest)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: fluidbox %s", syn)
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var p storedPolicy
	if done, err := fetch(ctx, c, f.outFlags, e.stdout, "GET", policyPath(pos[0], *version), nil, &p, "a policy"); done {
		return err
	}
	return printPolicy(e.stdout, p, true)
}

// policyPath is a policy's path, or one version's when version > 0.
func policyPath(id string, version int) string {
	path := "/v1/policies/" + url.PathEscape(id)
	if version > 0 {
		path += "/versions/" + strconv.Itoa(version)
	}
	return path
}

// printPolicy prints a policy version's header, its warnings and, with
// withDocument, the document indented.
func printPolicy(w io.Writer, p storedPolicy, withDocument bool) error {
	fmt.Fprintf(w, "policy   %s v%d\nname     %s\ndigest   %s\ncreated  %s\n", clean(p.ID, 64), p.Version, clean(p.Name, 120), clean(p.Digest, 80), clean(p.CreatedAt, 30))
	for _, warning := range p.Warnings {
		fmt.Fprintf(w, "warning: %s\n", clean(warning, 400))
	}
	if !withDocument {
		return nil
	}
	var doc bytes.Buffer
	if err := json.Indent(&doc, p.Document, "", "  "); err != nil {
		return fmt.Errorf("the answer's document is not JSON: %w", err)
	}
	_, err := fmt.Fprintf(w, "\n%s\n", doc.String())
	return err
}

// policyList is `policy list [--since T] [--until T] [--all]`, newest first.
func policyList(ctx context.Context, args []string, e cmdEnv) error {
	const syn = "policy list [--since T] [--until T] [--limit N] [--all] [--cursor C] [--json]"
	fs := newFlagSet("policy list", e.stderr, syn)
	f := addAPIFlags(fs, e.getenv)
	since := fs.String("since", "", "only policies created at or after this (RFC 3339, or a duration ago such as 24h)")
	until := fs.String("until", "", "only policies created at or before this (RFC 3339, or a duration ago)")
	limit := fs.Int("limit", 50, "policies per page (1-100)")
	all := fs.Bool("all", false, "follow every page to the end (progress on stderr)")
	cursor := fs.String("cursor", "", "continue from a page's next_cursor")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}}
	if err := setWindow(q, *since, *until, time.Now()); err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	list, next, err := readPages(ctx, c, "/v1/policies", "policies", q, *cursor, *all, e.stderr)
	if err != nil {
		return err
	}
	return printListing(e, f.outFlags, "policies", list, next, "no policies", "POLICY\tNAME\tVERSION\tUPDATED\tDIGEST", func(raw json.RawMessage) (string, error) {
		var p storedPolicy
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", fmt.Errorf("a policy in the answer is not what fluidbox sends: %w", err)
		}
		return fmt.Sprintf("%s\t%s\t%d\t%s\t%s", clean(p.ID, 64), clean(p.Name, 60), p.Version, clean(p.UpdatedAt, 30), clean(p.Digest, 80)), nil
	}, "more policies: --cursor "+next+" (or --all)")
}
