package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/itchyny/gojq"

	"github.com/fluidbox/fluidbox/shared/client"
)

// defaultURL is where `make run` listens.
const defaultURL = "http://127.0.0.1:8080"

// outFlags are the output flags of every command that can print JSON:
// --json, and --jq EXPR, which filters that JSON as gh's --jq does.
type outFlags struct {
	json bool
	jq   *gojq.Code
}

func addOutFlags(fs *flag.FlagSet) *outFlags {
	o := &outFlags{}
	fs.BoolVar(&o.json, "json", false, "print JSON for scripts instead of text")
	fs.Func("jq", "filter the JSON with a jq `EXPRESSION` (implies --json; a string result prints without quotes)", func(s string) error {
		q, err := gojq.Parse(s)
		if err != nil {
			return fmt.Errorf("not a jq expression: %v", err)
		}
		code, err := gojq.Compile(q)
		if err != nil {
			return fmt.Errorf("not a jq expression: %v", err)
		}
		o.jq, o.json = code, true
		return nil
	})
	return o
}

// write prints v as indented JSON, or what --jq makes of it: each result
// on its own, a string bare and anything else as indented JSON.
func (o *outFlags) write(w io.Writer, v any) error {
	if o.jq == nil {
		return writeJSON(w, v)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var in any
	if err := json.Unmarshal(raw, &in); err != nil {
		return err
	}
	iter := o.jq.Run(in)
	for {
		x, ok := iter.Next()
		if !ok {
			return nil
		}
		switch x := x.(type) {
		case error:
			return fmt.Errorf("--jq: %v", x)
		case string:
			if _, err := fmt.Fprintln(w, x); err != nil {
				return err
			}
		default:
			if err := writeJSON(w, x); err != nil {
				return err
			}
		}
	}
}

// apiFlags are the flags every command for humans takes.
type apiFlags struct {
	url   string
	token string
	*outFlags
	getenv func(string) string
}

func addAPIFlags(fs *flag.FlagSet, getenv func(string) string) *apiFlags {
	f := &apiFlags{}
	url := getenv("FLUIDBOX_URL")
	if url == "" {
		url = defaultURL
	}
	fs.StringVar(&f.url, "url", url, "the control plane's URL (FLUIDBOX_URL)")
	// The flag's default stays empty, and the variable is read only when
	// the flag is not given: a default would be printed by --help and in
	// every usage error.
	fs.StringVar(&f.token, "token", "", "admin token or SSO bearer (default: $FLUIDBOX_ADMIN_TOKEN; prefer the variable: flags show in ps)")
	f.getenv = getenv
	f.outFlags = addOutFlags(fs)
	return f
}

func (f *apiFlags) client() (*client.Client, error) {
	if f.token == "" {
		f.token = f.getenv("FLUIDBOX_ADMIN_TOKEN")
	}
	if f.token == "" {
		return nil, errors.New("no token: set FLUIDBOX_ADMIN_TOKEN (make run prints one) or pass --token")
	}
	return client.New(f.url, f.token)
}

// explain adds what a human can do about an API failure. The client's
// errors never hold the token, so they can be printed whole.
func explain(err error) error {
	switch {
	case errors.Is(err, client.ErrBadToken):
		return fmt.Errorf("%w; check FLUIDBOX_ADMIN_TOKEN or --token", err)
	case errors.Is(err, client.ErrUnreachable):
		return err // it names the URL and suggests make run
	}
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status == 403 {
		return fmt.Errorf("%w (an admin or approver token is needed)", err)
	}
	return err
}

// parseOneArg is parseArgs for a command that takes exactly one argument,
// what (an id, say): anything else prints the usage and is a usage error.
func parseOneArg(fs *flag.FlagSet, args []string, what string) (string, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 || strings.TrimSpace(pos[0]) == "" {
		fs.Usage()
		return "", usagef("want exactly one %s, got %d arguments", what, len(pos))
	}
	return pos[0], nil
}

// parseArgs parses flags that may come before, between or after the
// positional arguments (`approve apr_1 --session`), and returns the
// positional ones. A flag the set does not know, or a value it refuses, is
// a usage error (exit 2).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseFlags is fs.Parse with its errors made usage errors (exit 2): a
// flag the set does not know, or a value it refuses.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &usageError{msg: err.Error()}
}

// newFlagSet is a command's flag set. Its usage (on -h, --help or a wrong
// flag) is the command's help with synopsis as its usage line, then its
// flags.
func newFlagSet(name string, stderr io.Writer, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package prints a parse error before the usage; run prints
	// it once, after, as it prints every usage error.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		c, ok := lookup(strings.Fields(name)[0])
		if !ok {
			c = command{name: name}
		}
		help := commandHelp(c)
		_, rest, _ := strings.Cut(help, "\n")
		fmt.Fprintf(stderr, "usage: fluidbox %s\n%s\nflags:\n", synopsis, rest)
		printFlags(stderr, fs)
	}
	return fs
}

// printFlags lists a flag set's flags spelled as the usage lines spell
// them (--json, not the flag package's -json), each with its meaning and
// any default that is not the zero value.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, meaning := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name // -f, as the usage lines spell it
		}
		if arg != "" {
			line += " " + arg
		}
		switch f.DefValue {
		case "", "false", "0":
		default:
			meaning += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, meaning)
	})
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// clean makes an untrusted string safe and short for a terminal: control
// and formatting characters (escape sequences, bidi overrides, newlines)
// become spaces or are dropped, runs of spaces collapse, and it is cut at
// max runes with an ellipsis. Inputs come from agents, which must not be
// able to repaint a human's terminal.
func clean(s string, max int) string {
	var b strings.Builder
	space := false
	n := 0
	for _, r := range s {
		switch {
		case r == utf8.RuneError, unicode.Is(unicode.Cf, r):
			continue
		case unicode.IsSpace(r), unicode.IsControl(r):
			if space || b.Len() == 0 {
				continue
			}
			space = true
			r = ' '
		default:
			space = false
		}
		if n == max {
			return strings.TrimRight(b.String(), " ") + "…"
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimRight(b.String(), " ")
}

// timeLeft says how long until an RFC 3339 time, to the second.
func timeLeft(at string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return "?"
	}
	d := t.Sub(now).Truncate(time.Second)
	if d <= 0 {
		return "expired"
	}
	return d.String()
}

// clock shows an RFC 3339 time as local wall-clock time.
func clock(at string) string {
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return clean(at, 25)
	}
	return t.Local().Format("15:04:05")
}

// readPages reads a listing (GET path with q, its items under key) from
// cursor on: one page, or with all every page to the end, with progress
// on progress. It returns the items and the cursor of what is left.
func readPages(ctx context.Context, c *client.Client, path, key string, q url.Values, cursor string, all bool, progress io.Writer) ([]json.RawMessage, string, error) {
	var list []json.RawMessage
	next := cursor
	for page := 1; ; page++ {
		if next != "" {
			q.Set("cursor", next)
		}
		var p map[string]json.RawMessage
		if err := c.Get(ctx, path, q, &p); err != nil {
			return nil, "", explain(err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(p[key], &items); err != nil {
			return nil, "", fmt.Errorf("the answer of GET %s has no %q list: %w", path, key, err)
		}
		next = ""
		if raw, ok := p["next_cursor"]; ok {
			if err := json.Unmarshal(raw, &next); err != nil {
				return nil, "", fmt.Errorf("the answer of GET %s has a next_cursor that is not a string", path)
			}
		}
		list = append(list, items...)
		if !all || next == "" {
			return list, next, nil
		}
		fmt.Fprintf(progress, "page %d: %d %s so far...\n", page, len(list), key)
	}
}

// printListing prints what readPages read: with asJSON the page as JSON,
// else a table (header, then the row of each item, which row decodes) or
// empty when there is nothing; more is said on stderr when next is left.
func printListing(e cmdEnv, out *outFlags, key string, list []json.RawMessage, next, empty, header string, row func(json.RawMessage) (string, error), more string) error {
	if out.json {
		return out.write(e.stdout, pageJSON(key, list, next))
	}
	if len(list) == 0 && next == "" {
		_, err := fmt.Fprintln(e.stdout, empty)
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, raw := range list {
		line, err := row(raw)
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintln(e.stderr, more)
	}
	return nil
}

// fetch does one call and, with --json, prints its answer whole (done is
// true); otherwise it decodes the answer into v, which what names for an
// error. On an error done is true too.
func fetch(ctx context.Context, c *client.Client, out *outFlags, w io.Writer, method, path string, body, v any, what string) (done bool, err error) {
	var raw json.RawMessage
	if err := c.Do(ctx, method, path, body, &raw); err != nil {
		return true, explain(err)
	}
	if out.json {
		return true, out.write(w, raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("the answer is not %s: %w", what, err)
	}
	return false, nil
}

// pageJSON is what --json prints for a listing: its items under key, never
// null, and the cursor of what is left, if anything is.
func pageJSON(key string, list []json.RawMessage, next string) map[string]any {
	if list == nil {
		list = []json.RawMessage{}
	}
	out := map[string]any{key: list}
	if next != "" {
		out["next_cursor"] = next
	}
	return out
}
