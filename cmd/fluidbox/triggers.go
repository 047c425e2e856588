package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

const triggersSub = `
subcommands:
  list [--all] [--json]
  get ID [--json]
  create -f FILE [--json]                        FILE (or - for stdin): the configuration as POST /v1/triggers takes it
  update ID -f FILE [--rotate-runner-key] [--json]
  delete ID [--json]
  send-test --repository OWNER/NAME [--fork] [--action opened|synchronize|reopened] [--number N]
            [--secret S] [--delivery ID] [--json]
                                                 sign a sample pull_request delivery with the webhook secret and
                                                 post it to the local server's /v1/triggers/github
`

// triggers is `fluidbox triggers ...`.
func triggers(ctx context.Context, args []string, e cmdEnv) error {
	if len(args) == 0 || isHelp(args[0]) {
		c, _ := lookup("triggers")
		fmt.Fprint(e.stderr, commandHelp(c)+triggersSub)
		if len(args) == 0 {
			return usagef("want a subcommand: list, get, create, update, delete or send-test")
		}
		return nil
	}
	switch args[0] {
	case "list":
		return triggersList(ctx, args[1:], e)
	case "get":
		return triggerCall(ctx, "get", "GET", args[1:], e)
	case "create":
		return triggerCall(ctx, "create", "POST", args[1:], e)
	case "update":
		return triggerCall(ctx, "update", "PUT", args[1:], e)
	case "delete":
		return triggerCall(ctx, "delete", "DELETE", args[1:], e)
	case "send-test":
		return sendTest(ctx, args[1:], e)
	}
	return usagef("unknown subcommand %q: want list, get, create, update, delete or send-test", args[0])
}

type triggerView struct {
	ID            string `json:"id"`
	Repository    string `json:"repository"`
	PolicyID      string `json:"policy_id"`
	PolicyVersion int    `json:"policy_version"`
	TrustTier     string `json:"trust_tier"`
	Autonomous    bool   `json:"autonomous"`
	Budget        struct {
		LimitUSD float64 `json:"limit_usd"`
	} `json:"budget"`
	Revision      int    `json:"revision"`
	RunnerKey     string `json:"runner_key"`
	WebhookSecret string `json:"webhook_secret"`
	Status        string `json:"status"`
}

func triggersList(ctx context.Context, args []string, e cmdEnv) error {
	fs := newFlagSet("triggers list", e.stderr, "triggers list [--all] [--json]")
	f := addAPIFlags(fs, e.getenv)
	all := fs.Bool("all", false, "follow every page to the end")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	list, next, err := readPages(ctx, c, "/v1/triggers", "triggers", url.Values{"limit": {"100"}}, "", *all, e.stderr)
	if err != nil {
		return err
	}
	return printListing(e, f.outFlags, "triggers", list, next, "no trigger configurations", "TRIGGER\tREPOSITORY\tPOLICY\tTIER\tAUTONOMOUS\tBUDGET\tREVISION", func(raw json.RawMessage) (string, error) {
		var t triggerView
		if err := json.Unmarshal(raw, &t); err != nil {
			return "", fmt.Errorf("a trigger in the answer is not what fluidbox sends: %w", err)
		}
		pol := clean(t.PolicyID, 64)
		if t.PolicyVersion > 0 {
			pol += fmt.Sprintf(" v%d", t.PolicyVersion)
		}
		tier := t.TrustTier
		if tier == "" {
			tier = "(derived)"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%v\t$%.2f\t%d", clean(t.ID, 64), clean(t.Repository, 140), pol, clean(tier, 12), t.Autonomous, t.Budget.LimitUSD, t.Revision), nil
	}, "more configurations: --all")
}

// triggerCall is get, create, update and delete: one request, the answer
// printed.
func triggerCall(ctx context.Context, sub, method string, args []string, e cmdEnv) error {
	syn := map[string]string{"get": "triggers get ID [--json]", "create": "triggers create -f FILE [--json]",
		"update": "triggers update ID -f FILE [--rotate-runner-key] [--json]", "delete": "triggers delete ID [--json]"}[sub]
	fs := newFlagSet("triggers "+sub, e.stderr, syn)
	f := addAPIFlags(fs, e.getenv)
	var file *string
	var rotate *bool
	if sub == "create" || sub == "update" {
		file = fs.String("f", "", "the configuration as JSON (- for stdin)")
	}
	if sub == "update" {
		rotate = fs.Bool("rotate-runner-key", false, "give the trigger a new runner key (printed once); the old one stops working")
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	want := 1
	if sub == "create" {
		want = 0
	}
	if len(pos) != want {
		return usagef("usage: fluidbox %s", syn)
	}
	path := "/v1/triggers"
	if want == 1 {
		path += "/" + url.PathEscape(pos[0])
	}
	var body any
	if file != nil {
		if *file == "" {
			return usagef("-f FILE is required: the configuration as JSON")
		}
		doc, err := readDocument(*file, e.stdin)
		if err != nil {
			return err
		}
		if rotate != nil && *rotate {
			doc["rotate_runner_key"] = true
		}
		body = doc
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	var t triggerView
	if done, err := fetch(ctx, c, f.outFlags, e.stdout, method, path, body, &t, "a trigger"); done {
		return err
	}
	if t.Status == "deleted" {
		_, err := fmt.Fprintf(e.stdout, "trigger %s deleted\n", clean(t.ID, 64))
		return err
	}
	fmt.Fprintf(e.stdout, "trigger   %s\nrepo      %s\npolicy    %s\nbudget    $%.2f\nrevision  %d\n", clean(t.ID, 64), clean(t.Repository, 140), clean(t.PolicyID, 64), t.Budget.LimitUSD, t.Revision)
	if t.RunnerKey != "" {
		fmt.Fprintf(e.stdout, "runner key (shown once; it issues this trigger's runs' tokens):\n  export FLUIDBOX_TRIGGER_KEY=%s\n", clean(t.RunnerKey, 80))
	}
	if t.WebhookSecret != "" {
		fmt.Fprintf(e.stdout, "webhook secret (for the repository's webhook): %s\n", clean(t.WebhookSecret, 80))
	}
	return nil
}

// readInput reads at most max bytes of a file or of stdin ("-"); more is
// an error.
func readInput(name string, stdin io.Reader, max int) ([]byte, error) {
	var r io.Reader = stdin
	if name != "-" {
		fh, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	b, err := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s: over %d bytes", name, max)
	}
	return b, nil
}

// maxDocument bounds a configuration file.
const maxDocument = 1 << 20

// readDocument reads a JSON object from a file or stdin ("-").
func readDocument(name string, stdin io.Reader) (map[string]any, error) {
	b, err := readInput(name, stdin, maxDocument)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %w", name, err)
	}
	return doc, nil
}

var (
	repoArg   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$`)
	actionArg = regexp.MustCompile(`^(opened|synchronize|reopened|closed|edited)$`)
)

// loopback reports whether a URL's host is this machine: send-test signs
// with a real secret and creates a real run, so it talks to a local
// server only.
func loopback(u *url.URL) bool {
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// sampleDelivery is a pull_request delivery as GitHub sends it, with the
// fields fluidbox reads: the action, the number, the head commit and the
// base and head repositories (a fork's head lives in another repository).
func sampleDelivery(repo, action string, number int, fork bool, sha string) ([]byte, error) {
	owner, name, _ := strings.Cut(repo, "/")
	base := map[string]any{"id": 1296269, "full_name": repo, "name": name, "owner": map[string]any{"login": owner}, "fork": false}
	head := base
	if fork {
		head = map[string]any{"id": 2296269, "full_name": "contributor/" + name, "name": name, "owner": map[string]any{"login": "contributor"}, "fork": true}
	}
	return json.Marshal(map[string]any{
		"action": action,
		"number": number,
		"pull_request": map[string]any{
			"number": number,
			"title":  "fluidbox send-test",
			"head":   map[string]any{"sha": sha, "ref": "send-test", "repo": head},
			"base":   map[string]any{"sha": strings.Repeat("0", 40), "ref": "main", "repo": base},
		},
		"repository": base,
		"sender":     map[string]any{"login": head["owner"].(map[string]any)["login"]},
	})
}

func sendTest(ctx context.Context, args []string, e cmdEnv) error {
	fs := newFlagSet("triggers send-test", e.stderr, "triggers send-test --repository OWNER/NAME [--fork] [--action A] [--number N] [--secret S] [--delivery ID] [--json]")
	f := addAPIFlags(fs, e.getenv)
	repo := fs.String("repository", "", "the configured repository (owner/name)")
	fork := fs.Bool("fork", false, "the pull request comes from a fork (the run is read_only)")
	action := fs.String("action", "opened", "opened, synchronize or reopened create a run; others are ignored")
	number := fs.Int("number", 1, "the pull request's number")
	secret := fs.String("secret", e.getenv("FLUIDBOX_GITHUB_WEBHOOK_SECRET"), "the webhook secret to sign with (FLUIDBOX_GITHUB_WEBHOOK_SECRET; a trigger's own secret for own_webhook_secret)")
	delivery := fs.String("delivery", "", "the X-GitHub-Delivery id (default: a random one)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usagef("unexpected argument %q", pos[0])
	case !repoArg.MatchString(*repo):
		return usagef("--repository: want owner/name")
	case !actionArg.MatchString(*action):
		return usagef("--action: want opened, synchronize, reopened, closed or edited")
	case *number < 1:
		return usagef("--number: want a positive pull request number")
	case *secret == "":
		return errors.New("no secret to sign with: set FLUIDBOX_GITHUB_WEBHOOK_SECRET (fluidbox dev --print-webhook-secret prints one) or pass --secret")
	}
	u, err := url.Parse(f.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--url: want http://127.0.0.1:PORT")
	}
	if !loopback(u) {
		return fmt.Errorf("send-test posts only to a server on this machine (127.0.0.1, ::1 or localhost), not %s: it signs with the real secret and creates a real run", u.Host)
	}
	var rnd [16]byte
	_, _ = rand.Read(rnd[:])
	if *delivery == "" {
		*delivery = fmt.Sprintf("%x-%x-%x-%x-%x", rnd[0:4], rnd[4:6], rnd[6:8], rnd[8:10], rnd[10:16])
	}
	sum := sha256.Sum256(append([]byte(*delivery), rnd[:]...))
	body, err := sampleDelivery(*repo, *action, *number, *fork, hex.EncodeToString(sum[:20]))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, []byte(*secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(f.url, "/")+"/v1/triggers/github", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fluidbox-send-test")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", *delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	hc := &http.Client{Timeout: 30 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fluidbox at %s is unreachable (is make run going?): %w", u.Host, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	var out map[string]any
	if err := json.Unmarshal(answer, &out); err != nil {
		return fmt.Errorf("%s: the answer is not JSON", resp.Status)
	}
	if f.json {
		out["http_status"] = resp.StatusCode
		out["delivery"] = *delivery
		if err := f.write(e.stdout, out); err != nil {
			return err
		}
	}
	switch {
	case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK:
		if !f.json {
			fmt.Fprintf(e.stdout, "delivery %s: run %v (%v)\n", clean(*delivery, 40), clean(fmt.Sprint(out["session_id"]), 64), clean(fmt.Sprint(out["trust_tier"]), 12))
		}
		return nil
	case resp.StatusCode == http.StatusAccepted:
		if !f.json {
			fmt.Fprintf(e.stdout, "delivery %s ignored: %v\n", clean(*delivery, 40), clean(fmt.Sprint(out["reason"]), 200))
		}
		return nil
	}
	msg := ""
	if eb, ok := out["error"].(map[string]any); ok {
		msg = clean(fmt.Sprint(eb["message"]), 300)
	}
	return fmt.Errorf("%s: %s", resp.Status, msg)
}
