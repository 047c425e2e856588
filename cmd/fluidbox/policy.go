package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fluidbox/fluidbox/shared/client"
	"github.com/fluidbox/fluidbox/shared/evaluation"
	"github.com/fluidbox/fluidbox/shared/gate"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/policy/policyyaml"
	"github.com/fluidbox/fluidbox/shared/policy/tree"
	frozenrun "github.com/fluidbox/fluidbox/shared/run"
)

const policyUsage = `policy list [--since T] [--until T] [--limit N] [--all] [--cursor C] [--json]
       policy get POLICY_ID [--version N] [--json]
                             a version's header and its document (default: the latest)
       policy create -f FILE [--json]
       policy update POLICY_ID -f FILE [--json]
                             store a document (JSON or YAML, - for stdin) as a new policy or as
                             the policy's next version; it is checked and its tests run first
       policy eval (POLICY_ID [--version N] | -f FILE) (--command LINE | --tool NAME --input JSON)
       [--tier read_only] [--autonomous] [--workspace DIR] [--cwd DIR] [--class CLASS]
       [--kind FIELD=file|dir|absent]... [--walk] [--json]
                             how the policy decides one call, nothing recorded; -f decides offline
                             against a document, with the control plane's own code; --kind and
                             --walk send what the hook sends (a path's kind; for a Glob, what
                             exists under the directory it searches, walked here)
       policy shadow POLICY_ID [--since T] [--until T] [--limit N] [--json]
                             where the policy, as runs' shadow_policy_id, would have decided
                             differently (every page of runs, added up)
       policy test [--json] FILE...
                             validate documents and run their tests offline (exit 1 on a failure)
       policy fmt [--check] FILE...
                             rewrite documents in their canonical layout (meaning unchanged);
                             --check writes nothing and exits 1 if a file is not canonical
       policy import-claude [--name N] [--default VERDICT] [--bash-options catalogue|any] [-o FILE]
       .claude/settings.json a policy document from Claude Code's permissions (stdout, or FILE as
                             YAML or JSON by its name); on stderr, every rule not translated or
                             changed in meaning and every key not carried over, with why`

// policyCmd is `fluidbox policy SUBCOMMAND ...`.
func policyCmd(ctx context.Context, args []string, e cmdEnv) error {
	getenv, stdout, stderr := e.getenv, e.stdout, e.stderr
	if len(args) == 0 {
		fmt.Fprintf(stderr, "usage: fluidbox %s\n", policyUsage)
		return usagef("a subcommand is needed")
	}
	switch args[0] {
	case "list":
		return policyList(ctx, args[1:], e)
	case "get":
		return policyGet(ctx, args[1:], e)
	case "create", "update":
		return policyWrite(ctx, args[0], args[1:], e)
	case "eval":
		return policyEval(ctx, args[1:], e)
	case "shadow":
		return policyShadow(ctx, args[1:], getenv, stdout, stderr)
	case "test":
		return policyTest(args[1:], stdout, stderr)
	case "import-claude":
		return policyImportClaude(args[1:], stdout, stderr)
	case "fmt":
		return policyFmt(args[1:], e)
	case "help", "-h", "--help":
		c, _ := lookup("policy")
		fmt.Fprint(stdout, commandHelp(c))
		fmt.Fprintf(stdout, "\nsubcommands:\n  fluidbox %s\n", policyUsage)
		return nil
	}
	return usagef("unknown subcommand %q (list, get, create, update, eval, shadow, test, fmt, import-claude)", args[0])
}

// policyEval asks how a policy decides one call, as a run with the given
// tier, autonomy and workspace would be answered; nothing is recorded.
// With -f it decides offline, with the same code as the control plane
// (package evaluation), against a document in a file. The exit status is
// 0 whatever the decision: the answer is the output.
func policyEval(ctx context.Context, args []string, e cmdEnv) error {
	stdout := e.stdout
	fs := newFlagSet("policy eval", e.stderr, policyUsage)
	f := addAPIFlags(fs, e.getenv)
	file := fs.String("f", "", "decide offline against this policy document (JSON or YAML, - for stdin) instead of a stored policy")
	command := fs.String("command", "", "a Bash command line (the tool is then Bash)")
	tool := fs.String("tool", "", "the tool name (Bash, Read, mcp__jira__create_issue, ...)")
	input := fs.String("input", "", "the tool's input as a JSON object")
	version := fs.Int("version", 0, "a policy version (default: the latest)")
	tier := fs.String("tier", "", "the run's trust tier: trusted (default) or read_only")
	autonomous := fs.Bool("autonomous", false, "decide as an autonomous run (require_approval takes the policy's fallback)")
	workspace := fs.String("workspace", "", "the run's workspace: relative path globs resolve against it")
	cwd := fs.String("cwd", "", "the caller's working directory: relative paths resolve against it")
	class := fs.String("class", "", "the class of a tool that is not Claude Code's (read, write, execute, egress)")
	kinds := map[string]string{}
	fs.Func("kind", "FIELD=KIND: what is at an input path field (file, dir or absent), as the hook sends it; repeatable", func(s string) error {
		field, kind, ok := strings.Cut(s, "=")
		if !ok || field == "" {
			return fmt.Errorf("want FIELD=KIND, such as path=file")
		}
		kinds[field] = kind
		return nil
	})
	walk := fs.Bool("walk", false, "for a Glob, walk the directory it searches here (its path, else --cwd) and send what exists there, as the hook does")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *file == "" && len(pos) != 1:
		return usagef("one POLICY_ID, or -f FILE, is needed (usage: fluidbox %s)", policyUsage)
	case *file != "" && (len(pos) > 0 || *version > 0):
		return usagef("-f decides against a file: give no POLICY_ID or --version with it")
	}
	req := evaluation.Request{TrustTier: *tier, Autonomous: *autonomous, Workspace: *workspace, Cwd: *cwd, Class: *class}
	switch {
	case *command != "" && (*tool != "" || *input != ""):
		return usagef("--command is a Bash call; give either it or --tool and --input")
	case *command != "":
		req.ToolName, req.Input = "Bash", map[string]any{"command": *command}
	case *tool != "":
		req.ToolName, req.Input = *tool, map[string]any{}
		if *input != "" {
			dec := json.NewDecoder(strings.NewReader(*input))
			dec.UseNumber()
			if err := dec.Decode(&req.Input); err != nil {
				return usagef("--input: not JSON: %v", err)
			}
		}
	default:
		return usagef("--command or --tool is needed")
	}
	if len(kinds) > 0 {
		req.PathKinds = kinds
	}
	if *walk {
		m, _ := req.Input.(map[string]any)
		dir, _ := m["path"].(string)
		root := tree.Root(dir, *cwd)
		if req.ToolName != "Glob" || root == "" {
			return usagef("--walk walks a Glob's directory: give --tool Glob and an absolute --cwd or path")
		}
		wctx, cancel := context.WithTimeout(ctx, tree.MaxTime)
		rep := tree.Walk(wctx, root)
		cancel()
		req.SearchReport = &rep
	}
	var out evaluation.View
	if *file != "" {
		if out, err = evalFile(*file, req, e.stdin); err != nil {
			return err
		}
	} else {
		c, err := f.client()
		if err != nil {
			return err
		}
		if err := c.Do(ctx, "POST", policyPath(pos[0], *version)+"/evaluate", req, &out); err != nil {
			return explain(err)
		}
	}
	if f.json {
		return f.write(stdout, out)
	}
	return printEvaluation(stdout, out)
}

// policyShadow reads every page of a policy's shadow summary (GET
// /v1/policies/{id}/shadow) and adds them up: the differences of every run
// created with the policy as its shadow, in the time bounds given.
func policyShadow(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("policy shadow", stderr, "policy shadow POLICY_ID [--since T] [--until T] [--limit N] [--json]")
	f := addAPIFlags(fs, getenv)
	since := fs.String("since", "", "only runs created at or after this (RFC 3339, or a duration ago such as 168h)")
	until := fs.String("until", "", "only runs created at or before this (RFC 3339, or a duration ago)")
	limit := fs.Int("limit", 100, "runs per page read (1-100)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("one POLICY_ID is needed (usage: fluidbox policy shadow POLICY_ID)")
	}
	q := url.Values{}
	if err := setWindow(q, *since, *until, time.Now()); err != nil {
		return err
	}
	q.Set("limit", strconv.Itoa(*limit))
	c, err := f.client()
	if err != nil {
		return err
	}
	sum := client.ShadowSummary{PolicyID: pos[0], ByDifference: []client.ShadowGroup{}}
	for page := 1; ; page++ {
		var p client.ShadowSummary
		if err := c.Get(ctx, "/v1/policies/"+url.PathEscape(pos[0])+"/shadow", q, &p); err != nil {
			return explain(err)
		}
		sum.Merge(p)
		if p.NextCursor == "" {
			break
		}
		q.Set("cursor", p.NextCursor)
		fmt.Fprintf(stderr, "page %d: %d runs so far...\n", page, sum.Runs)
	}
	if f.json {
		return f.write(stdout, sum)
	}
	return printShadow(stdout, sum)
}

func printShadow(w io.Writer, s client.ShadowSummary) error {
	fmt.Fprintf(w, "policy %s as a shadow: %d runs, %d with a difference, %d calls decided differently\n",
		clean(s.PolicyID, 40), s.Runs, s.RunsDiffering, s.Differences)
	if s.RunsCut > 0 {
		fmt.Fprintf(w, "%d runs had more kinds of difference than are read of one run; their counts are partial\n", s.RunsCut)
	}
	if len(s.ByDifference) == 0 {
		return nil
	}
	side := func(verdict, rule string) string {
		if rule == "" {
			return verdict + " (default)"
		}
		return verdict + " (" + clean(rule, 60) + ")"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CALLS\tRUNS\tTOOL\tENFORCED\tSHADOW\tSAMPLE")
	for _, g := range s.ByDifference {
		shadow := side(g.ShadowVerdict, g.ShadowRuleID)
		if g.ShadowError {
			shadow = "error (could not decide)"
		}
		sample := ""
		if len(g.Samples) > 0 {
			x := g.Samples[0]
			sample = fmt.Sprintf("%s seq %d", clean(x.SessionID, 40), x.Seq)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", g.Count, g.Runs, clean(g.ToolName, 80), side(g.Verdict, g.RuleID), shadow, sample)
	}
	return tw.Flush()
}

// evalFile decides req offline against the policy document in name (- for
// stdin). A tool named as a connection's (mcp__<connection>__<tool>) with
// a --class is judged as that brokered tool, as the control plane judges
// it when such a connection exists: a file knows no connections, and the
// stricter reading is the one that cannot mislead.
func evalFile(name string, req evaluation.Request, stdin io.Reader) (evaluation.View, error) {
	if err := req.Check(); err != nil {
		return evaluation.View{}, usagef("%v", err)
	}
	data, err := readInput(name, stdin, policy.MaxDocumentBytes)
	if err != nil {
		return evaluation.View{}, err
	}
	p, _, err := policyyaml.Parse(data)
	if err != nil {
		return evaluation.View{}, fmt.Errorf("%s: %w", name, err)
	}
	conn := ""
	if c, ok := frozenrun.BrokeredConnection(req.ToolName); ok && req.Class != "" && !evaluation.Builtin(req.ToolName) {
		conn = "(a connection named " + c + ")"
	}
	return evaluation.Decide(evaluation.Policy{Policy: p, Digest: p.Digest()}, req, conn), nil
}

func printEvaluation(w io.Writer, e evaluation.View) error {
	rule := e.RuleID
	if rule == "" {
		rule = "(none)"
	}
	where := fmt.Sprintf("policy %s version %d", clean(e.PolicyID, 40), e.PolicyVersion)
	if e.PolicyID == "" {
		where = "policy file, offline"
	}
	fmt.Fprintf(w, "%s  (%s, rule %s)\n", strings.ToUpper(string(e.Decision)), where, clean(rule, 60))
	fmt.Fprintf(w, "reason: %s\n", clean(e.Reason, 400))
	if e.Rewritten != "" {
		fmt.Fprintf(w, "policy said %s; autonomy rewrote it to %s\n", e.Verdict, e.Rewritten)
	}
	if len(e.UpdatedInput) > 0 {
		fmt.Fprintf(w, "runs with (narrowed): %s\n", clean(string(e.UpdatedInput), 400))
	}
	fmt.Fprintln(w, "stages:")
	for _, s := range e.Trace.Stages {
		line := "  " + s.Stage + ": " + s.Outcome
		if s.Reason != "" && s.Outcome != gate.StepPass {
			line += " (" + clean(s.Reason, 300) + ")"
		}
		fmt.Fprintln(w, line)
	}
	if !e.Trace.Tool.Builtin && e.Trace.Tool.Class == "" {
		fmt.Fprintf(w, "  (tool %s is not Claude Code's and has no --class: the schema and trust tier stages were skipped)\n", clean(e.Trace.Tool.Name, 80))
	}
	b := e.Trace.Bash
	if b == nil {
		return nil
	}
	fmt.Fprintln(w, "bash:")
	if !b.Parsed {
		fmt.Fprintf(w, "  does not parse: %s\n", clean(b.ParseError, 200))
	}
	if len(b.Commands) > 0 {
		fmt.Fprintln(w, "  commands allow rules judge:")
		for _, c := range b.Commands {
			fmt.Fprintf(w, "    %s\n", clean(strings.Join(c, " "), 200))
		}
	} else if b.NotPlain != "" {
		fmt.Fprintf(w, "  not a plain command line, so no allow rule judges it: %s\n", clean(b.NotPlain, 200))
	}
	if len(b.Normalized) > 0 {
		fmt.Fprintln(w, "  commands deny rules see:")
		for _, c := range b.Normalized {
			fmt.Fprintf(w, "    %s\n", clean(strings.Join(c, " "), 200))
		}
	}
	if b.Opaque != "" {
		fmt.Fprintf(w, "  opaque: %s\n", clean(b.Opaque, 200))
	}
	if b.ReadOnly {
		fmt.Fprintln(w, "  read-only: yes (a read_only run may run it)")
	} else {
		fmt.Fprintf(w, "  read-only: no (%s)\n", clean(b.NotRead, 200))
	}
	return nil
}

// errTestsFailed: a document did not validate or a test failed; the output
// says which.
var errTestsFailed = errors.New("policy tests failed")

// policyTest validates each document file and runs its tests, with the
// same code the control plane runs at create and update; no server is
// needed.
func policyTest(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("policy test", stderr, "policy test [--json] FILE...")
	out := addOutFlags(fs)
	files, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("one or more policy files are needed")
	}
	type fileResult struct {
		File     string               `json:"file"`
		Error    string               `json:"error,omitempty"`
		Tests    int                  `json:"tests"`
		Failures []policy.TestFailure `json:"failures"`
		Warnings []string             `json:"warnings,omitempty"`
	}
	var results []fileResult
	failed := false
	for _, name := range files {
		res := fileResult{File: name, Failures: []policy.TestFailure{}}
		data, err := os.ReadFile(name)
		if err != nil {
			res.Error = "cannot read the file: " + err.Error()
		} else if p, warns, err := policyyaml.Parse(data); err != nil {
			res.Error = err.Error()
		} else {
			res.Tests = len(p.Document().Tests)
			res.Failures = append(res.Failures, p.RunTests()...)
			for _, w := range warns {
				res.Warnings = append(res.Warnings, w.String())
			}
		}
		failed = failed || res.Error != "" || len(res.Failures) > 0
		results = append(results, res)
	}
	if out.json {
		if err := out.write(stdout, map[string]any{"results": results}); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			switch {
			case r.Error != "":
				fmt.Fprintf(stdout, "FAIL %s: %s\n", r.File, r.Error)
			case len(r.Failures) > 0:
				fmt.Fprintf(stdout, "FAIL %s: %d of %d tests failed\n", r.File, len(r.Failures), r.Tests)
				for _, f := range r.Failures {
					fmt.Fprintf(stdout, "  %s\n", f)
				}
			case r.Tests == 0:
				fmt.Fprintf(stdout, "ok   %s (valid; it has no tests)\n", r.File)
			default:
				fmt.Fprintf(stdout, "ok   %s (%d tests)\n", r.File, r.Tests)
			}
			for _, w := range r.Warnings {
				fmt.Fprintf(stdout, "  warning: %s\n", w)
			}
		}
	}
	if failed {
		return errTestsFailed
	}
	return nil
}

// policyImportClaude writes a policy document translated from a Claude
// Code settings file's permissions, to stdout or to -o FILE in the format
// its name says (.yaml or .yml: YAML; else JSON). On stderr it reports
// every rule it could not translate, every rule whose meaning changed and
// every key it did not carry over, each with why, and the document's
// warnings.
func policyImportClaude(args []string, stdout, stderr io.Writer) error {
	const syn = "policy import-claude [--name N] [--default VERDICT] [--bash-options catalogue|any] [-o FILE] SETTINGS_FILE"
	fs := newFlagSet("policy import-claude", stderr, syn)
	name := fs.String("name", "imported-from-claude-code", "the policy's name")
	def := fs.String("default", string(policy.VerdictRequireApproval), "the default verdict for calls no rule matches: allow, deny or require_approval")
	bashOptions := fs.String("bash-options", string(policy.OptionsCatalogue), "what may follow a Bash(prefix:*) allow's prefix: catalogue (the read-only catalogue's words, fluidbox's default) or any (Claude Code's meaning)")
	out := fs.String("o", "", "write the document to this file (.yaml or .yml for YAML, else JSON) instead of stdout")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("one settings file is needed (such as .claude/settings.json)")
	}
	if o := policy.Options(*bashOptions); o != policy.OptionsCatalogue && o != policy.OptionsAny {
		return usagef("--bash-options: %q is not catalogue or any", *bashOptions)
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return err
	}
	doc, rep, err := policy.FromClaudeSettings(data, policy.ClaudeImport{Name: *name, DefaultVerdict: policy.Verdict(*def), AnyOptions: *bashOptions == string(policy.OptionsAny)})
	if err != nil {
		return err
	}
	_, warns, err := policy.New(doc)
	if err != nil {
		return usagef("%v", err) // an unknown --default, named by its field
	}
	text, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	text = append(text, '\n')
	if ext := strings.ToLower(filepath.Ext(*out)); ext == ".yaml" || ext == ".yml" {
		if text, err = policyYAML(text); err != nil {
			return err
		}
	}
	if *out == "" {
		_, err = stdout.Write(text)
	} else if err = os.WriteFile(*out, text, 0o644); err == nil {
		fmt.Fprintf(stderr, "wrote %s (%d rules)\n", *out, len(doc.Rules))
	}
	if err != nil {
		return err
	}
	for _, u := range rep.Untranslated {
		fmt.Fprintf(stderr, "not translated (%s): %s: %s\n", u.List, clean(u.Rule, 200), u.Reason)
	}
	for _, c := range rep.Changed {
		fmt.Fprintf(stderr, "changed (%s): %s, rule %s: %s\n", c.List, clean(c.Rule, 200), c.RuleID, c.Change)
	}
	for _, k := range rep.Ignored {
		fmt.Fprintf(stderr, "not carried over: %s: %s\n", clean(k.Key, 100), k.Reason)
	}
	for _, w := range warns {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if n := len(rep.Untranslated); n > 0 {
		fmt.Fprintf(stderr, "%d rules were not translated; add their equivalent by hand or leave them to the default verdict (%s)\n", n, doc.DefaultVerdict)
	}
	return nil
}
