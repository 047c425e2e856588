package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fluidbox/fluidbox/shared/client"
)

// events prints a run's timeline: `fluidbox events RUN [--follow]`;
// `fluidbox events export` is every run's (export.go).
func events(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "export" {
		return eventsExport(ctx, args[1:], getenv, stdout, stderr)
	}
	fs := newFlagSet("events", stderr, "events RUN_ID [--follow] [--after SEQ] [--json]")
	f := addAPIFlags(fs, getenv)
	follow := fs.Bool("follow", false, "keep streaming new events (server-sent events; resumes exactly after a dropped connection)")
	after := fs.Int64("after", 0, "show only events with a seq above this")
	run, err := parseOneArg(fs, args, "run id (ses_...)")
	if err != nil {
		return err
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	if !*follow {
		all := client.Events{Events: []client.Event{}}
		for cur := *after; ; {
			page, err := c.Events(ctx, run, cur, 1000, 0)
			if err != nil {
				return explain(err)
			}
			all.Events = append(all.Events, page.Events...)
			all.LastSeq = page.LastSeq
			if len(page.Events) == 0 || page.Events[len(page.Events)-1].Seq >= page.LastSeq {
				break
			}
			cur = page.Events[len(page.Events)-1].Seq
		}
		if f.json {
			return f.write(stdout, all)
		}
		for _, e := range all.Events {
			if err := printEvent(stdout, e); err != nil {
				return err
			}
		}
		if len(all.Events) == 0 {
			fmt.Fprintf(stdout, "no events after seq %d (last seq %d)\n", *after, all.LastSeq)
		}
		return nil
	}
	// Following: one JSON object a line with --json, else a timeline line.
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	err = c.Follow(ctx, run, *after, func(e client.Event) error {
		switch {
		case f.jq != nil:
			return f.write(stdout, e)
		case f.json:
			return enc.Encode(e)
		}
		return printEvent(stdout, e)
	}, client.FollowOptions{OnReconnect: func(last int64, cause error) {
		fmt.Fprintf(stderr, "fluidbox events: stream interrupted (%v); resuming after seq %d\n", cause, last)
	}})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // Ctrl-C
	}
	return explain(err)
}

// printEvent writes one timeline line: seq, time, type, then what happened.
func printEvent(w io.Writer, e client.Event) error {
	_, err := fmt.Fprintf(w, "%6d  %s  %-18s  %s\n", e.Seq, clock(e.At), clean(e.Type, 30), describeEvent(e))
	return err
}

// describeEvent is the human part of a timeline line, from the event's
// redacted data: ids, verdicts, sources and rules (the ledger has no inputs).
func describeEvent(e client.Event) string {
	var d map[string]any
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return ""
	}
	get := func(k string) string {
		switch v := d[k].(type) {
		case string:
			return clean(v, 80)
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		case bool:
			return strconv.FormatBool(v)
		}
		return ""
	}
	join := func(parts ...string) string {
		var out []string
		for _, p := range parts {
			if strings.TrimSpace(p) != "" {
				out = append(out, p)
			}
		}
		return strings.Join(out, " ")
	}
	opt := func(label, k string) string {
		if v := get(k); v != "" {
			return label + v
		}
		return ""
	}
	// shadow is where the run's shadow policy would have differed; the
	// ledger carries it only then.
	shadow := func() string {
		if code := get("shadow_error"); code != "" {
			return "[shadow: " + code + "]"
		}
		v := get("shadow_verdict")
		if v == "" {
			return ""
		}
		if rw := get("shadow_rewritten_verdict"); rw != "" {
			v += " rewritten to " + rw
		}
		if rule := get("shadow_rule_id"); rule != "" {
			v += ", rule " + rule
		}
		return "[shadow: " + v + "]"
	}
	switch e.Type {
	case "session.created":
		auto := ""
		if get("autonomous") == "true" {
			auto = "autonomous,"
		}
		return join("policy", get("policy_id"), "v"+get("policy_version")+",", get("tools"), "tools, trust", get("trust_tier")+",", auto, opt("trigger ", "trigger"), opt("by ", "invoker"), opt("shadow ", "shadow_policy_id"), opt("v", "shadow_policy_version"))
	case "tool.requested":
		return join(get("tool_call_id"), get("tool_name"))
	case "tool.decision":
		var why []string
		for _, p := range []string{get("source"), opt("rule ", "rule_id"), opt("approval ", "approval_id"), opt("grant ", "grant")} {
			if p != "" {
				why = append(why, p)
			}
		}
		verdict := ""
		if rw := get("rewritten_verdict"); rw != "" {
			verdict = fmt.Sprintf("[%s rewritten to %s]", get("verdict"), rw)
		}
		s := join(get("tool_call_id"), get("tool_name"), "->", get("decision"), verdict)
		if len(why) > 0 {
			s += " (" + strings.Join(why, ", ") + ")"
		}
		return join(s, shadow())
	case "approval.requested":
		return join(get("approval_id"), get("tool_call_id"), get("tool_name"), opt("rule ", "rule_id"), opt("scope ", "default_scope"), "expires", clock(get("expires_at")), shadow())
	case "approval.decided":
		return join(get("approval_id"), get("tool_call_id"), get("status"), opt("by ", "decided_by"))
	case "session.ended":
		return opt("by ", "ended_by")
	case "grant.revoked":
		return join(get("scope_key"), opt("by ", "revoked_by"))
	case "tool.brokered":
		errMark := ""
		if get("is_error") == "true" {
			errMark = "error"
		}
		return join(get("tool_call_id"), get("tool_name"), "via", get("connection_id"), get("latency_ms")+"ms", errMark)
	case "budget.reserved":
		return join(get("request_id"), get("model"), "reserved", micros(d["reserved_micros"]))
	case "budget.reconciled":
		return join(get("request_id"), "in", get("input_tokens"), "out", get("output_tokens"), "tokens, cost", micros(d["cost_micros"]), get("settlement"))
	}
	b, _ := json.Marshal(d)
	return clean(string(b), 120)
}

// micros shows a millionth-of-a-dollar amount as dollars.
func micros(v any) string {
	f, ok := v.(float64)
	if !ok {
		return ""
	}
	return fmt.Sprintf("$%.6f", f/1e6)
}
