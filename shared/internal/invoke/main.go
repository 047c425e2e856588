// Command invoke is our stand-in for `sam local invoke`: it builds a
// function's bootstrap, starts minidyn on loopback with the table and the
// fixtures in events/fixtures, runs the bootstrap under the AWS Lambda
// Runtime Interface Emulator, posts an event file and prints the response.
//
// Besides the fixture policies it seeds one run, ses_fixture, with two
// pending approvals the sample events name: apr_fixtureoverdue (past its
// time, for expire and sweep) and apr_fixturepending (an hour to go, for
// the approvals routes). The function may publish to EventBridge: a
// loopback stand-in accepts PutEvents and each entry is printed on stderr
// as `published <detail-type> <detail>`.
//
//	go run ./shared/internal/invoke -fn control -event events/control/create-session.json
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/rie"
	"github.com/fluidbox/fluidbox/shared/internal/smtest"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/store"
)

// AdminToken is the operator token the sample events carry.
const AdminToken = "local-invoke-admin-token-0123456789abcdef"

// EventBus is the bus the notify function is given.
const EventBus = "fluidbox-invoke"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "invoke: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fn := fs.String("fn", "", "function name: a folder under functions/")
	event := fs.String("event", "", "event file to post")
	fixtures := fs.String("fixtures", "events/fixtures", "folder of fixtures to seed")
	logs := fs.Bool("logs", false, "print the emulator's and function's logs to stderr")
	builtBootstrap := fs.String("bootstrap", "", "run this built bootstrap instead of building the function")
	builtEmulator := fs.String("emulator", "", "use this built aws-lambda-rie instead of building it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fn == "" || *event == "" {
		return errors.New("usage: invoke -fn NAME -event FILE")
	}
	payload, err := os.ReadFile(*event)
	if err != nil {
		return err
	}
	if !json.Valid(payload) {
		return fmt.Errorf("%s is not JSON", *event)
	}

	work, err := os.MkdirTemp("", "fluidbox-invoke-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	bootstrap, emulator := *builtBootstrap, *builtEmulator
	if bootstrap == "" || emulator == "" {
		fmt.Fprintf(stderr, "building %s and the emulator...\n", *fn)
	}
	if bootstrap == "" {
		if bootstrap, err = rie.BuildFunction(ctx, "./functions/"+*fn, filepath.Join(work, *fn)); err != nil {
			return err
		}
	}
	if emulator == "" {
		if emulator, err = rie.BuildRIE(ctx, work); err != nil {
			return err
		}
	}

	db, err := devstack.StartDynamoDB("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer db.Close()
	const table = "fluidbox-invoke"
	st := store.New(devstack.DynamoClient(db.URL), table)
	if err := st.CreateTable(ctx); err != nil {
		return err
	}
	if err := seed(ctx, st, *fixtures); err != nil {
		return fmt.Errorf("seed %s: %w", *fixtures, err)
	}
	if err := seedApprovals(ctx, st, time.Now()); err != nil {
		return fmt.Errorf("seed approvals: %w", err)
	}
	if err := seedTrigger(ctx, st); err != nil {
		return fmt.Errorf("seed a trigger: %w", err)
	}
	gateRun, gateToken, err := seedGateRun(ctx, st)
	if err != nil {
		return fmt.Errorf("seed a run for the gate events: %w", err)
	}
	payload = bytes.ReplaceAll(payload, []byte("${FIXTURE_SESSION_ID}"), []byte(gateRun))
	payload = bytes.ReplaceAll(payload, []byte("${FIXTURE_SESSION_TOKEN}"), []byte(gateToken))
	bus := startEventBridge(stderr)
	defer bus.Close()
	secrets := smtest.Start()
	defer secrets.Close()
	noKMS := startNoKMS()
	defer noKMS.Close()

	e, err := rie.Start(ctx, emulator, bootstrap, []string{
		"FLUIDBOX_TABLE=" + table,
		"FLUIDBOX_ADMIN_TOKEN=" + AdminToken,
		"FLUIDBOX_GITHUB_WEBHOOK_SECRET=" + WebhookSecret,
		"AWS_ENDPOINT_URL_DYNAMODB=" + db.URL,
		"AWS_ENDPOINT_URL_EVENTBRIDGE=" + bus.URL,
		"FLUIDBOX_EVENT_BUS=" + EventBus,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER=" + secrets.URL,
		"FLUIDBOX_LAUNCH_SECRET_PREFIX=fluidbox-invoke/launch/",
		"AWS_ENDPOINT_URL_KMS=" + noKMS.URL, "FLUIDBOX_KMS_KEY_ID=alias/fluidbox-invoke",
		"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local",
	})
	if err != nil {
		return err
	}
	defer e.Close()
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := e.Invoke(ictx, payload)
	if *logs || err != nil {
		fmt.Fprint(stderr, e.Logs())
	}
	if err != nil {
		return err
	}
	var pretty any
	if json.Unmarshal(out, &pretty) == nil {
		out, _ = json.MarshalIndent(pretty, "", "  ")
	}
	fmt.Fprintln(stdout, string(out))
	return nil
}

// seed stores the fixture policies: each policy-<id>.json becomes version 1
// of policy <id>, so sample events can name it.
func seed(ctx context.Context, st *store.Store, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "policy-*.json"))
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		p, _, err := policy.Parse(data)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		doc, err := json.Marshal(p.Document())
		if err != nil {
			return err
		}
		id := filepath.Base(f)
		id = id[len("policy-") : len(id)-len(".json")]
		err = st.PutPolicyVersion(ctx, store.PolicyVersion{
			PolicyID: id, Version: 1, Name: p.Document().Name, Digest: p.Digest(),
			Document: string(doc), CreatedAt: time.Now().UTC().Format(time.RFC3339),
		})
		if err != nil {
			return err
		}
	}
	return nil
}
