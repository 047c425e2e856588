package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/fluidbox/fluidbox/shared/admission"
	"github.com/fluidbox/fluidbox/shared/auth"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/budget"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/egress"
	"github.com/fluidbox/fluidbox/shared/elicitation"
	"github.com/fluidbox/fluidbox/shared/githubapp"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/modelproxy"
	"github.com/fluidbox/fluidbox/shared/notify"
	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/schedule/firing"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/slackbot"
	"github.com/fluidbox/fluidbox/shared/sso"
	"github.com/fluidbox/fluidbox/shared/store"
	"github.com/fluidbox/fluidbox/shared/sweep"
	"github.com/fluidbox/fluidbox/shared/telemetry/otlp"
)

// dev runs the local control plane: the same API handler the Lambda
// functions serve, on loopback, over an embedded DynamoDB-API server unless
// AWS_ENDPOINT_URL_DYNAMODB points at one.
func dev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dev", stderr, "dev [--print-webhook-secret | --webhook-secret-file FILE] [--launcher local|none] [--claude PATH]")
	printSecret := fs.Bool("print-webhook-secret", false, "when FLUIDBOX_GITHUB_WEBHOOK_SECRET is unset, generate a GitHub webhook secret and print it with the export lines, so a pull request can be tried without a restart")
	secretFile := fs.String("webhook-secret-file", "", "when FLUIDBOX_GITHUB_WEBHOOK_SECRET is unset, read the GitHub webhook secret from this `FILE`, or generate one into it (mode 0600) when it does not exist, and print it with the export lines: the same secret after every restart")
	launcherName := fs.String("launcher", "none", "local: start `fluidbox runner` for every triggered run whose trigger has a prompt, in a loopback-only network namespace (needs root); none: runs wait for a runner started by hand")
	claudeCLI := fs.String("claude", "claude", "with --launcher local: the Claude Code CLI the runners run")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := config.Load(getenv, config.Dev)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	if cfg.AdminToken == "" {
		cfg.AdminToken, err = newAdminToken()
		if err != nil {
			return err
		}
	}
	printedSecret := ""
	switch {
	case cfg.GitHubWebhookSecret != "":
	case *secretFile != "":
		if cfg.GitHubWebhookSecret, err = webhookSecretFile(*secretFile); err != nil {
			return err
		}
		printedSecret = cfg.GitHubWebhookSecret
	case *printSecret:
		if cfg.GitHubWebhookSecret, err = newWebhookSecret(); err != nil {
			return err
		}
		printedSecret = cfg.GitHubWebhookSecret
	}
	endpoint := cfg.DynamoDBEndpoint
	if endpoint == "" {
		db, err := devstack.StartDynamoDB("127.0.0.1:0")
		if err != nil {
			return err
		}
		defer db.Close()
		endpoint = db.URL
		log.Info("embedded DynamoDB (minidyn) started; data lives in memory until exit", "endpoint", endpoint)
	}
	st := store.New(devstack.DynamoClient(endpoint), cfg.Table)
	if err := st.CreateTable(ctx); err != nil {
		return fmt.Errorf("create table %s at %s: %w", cfg.Table, endpoint, err)
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
		log.Warn("listening on a non-loopback address: anyone who can reach it and holds a token can use this control plane", "addr", ln.Addr())
	}
	var seqOpts []ledger.Option
	if cfg.SequenceOnRead {
		seqOpts = append(seqOpts, ledger.SequenceOnlyWhenRead)
	}
	led := ledger.New(st, time.Now, seqOpts...)
	prices, sealer, err := devModelProxy(ctx, cfg, st, log)
	if err != nil {
		return err
	}
	// Notifications: every committed approval and input request
	// transition, printed on stderr as `notification <type> <detail>` by the same conversion the
	// notify function applies to the table's stream.
	notifier := notify.NewHandler(notify.NewPrinter(stderr), nil, log)
	notifications, inputNotifications := notifier.Observer(), notifier.InputObserver()
	slackCfg, err := slackbot.FromConfig(cfg)
	if err != nil {
		return err
	}
	// Halts of runs by the model proxy: printed the same way.
	halted := notifier.Halted
	if slackCfg.Enabled() {
		// The Slack function's code, fed in-process by the same observer:
		// it posts in the background and retries, never delaying a decision.
		n := slackbot.NewNotifier(slackbot.NewClient(slackCfg), st, slackCfg.Channel, log, time.Now).WithUsers(slackCfg.Users)
		notifications = bothTransitions(notifications, n.Observer())
		inputNotifications = bothTransitions(inputNotifications, n.InputObserver())
		printedHalt, postedHalt := halted, n.HaltObserver()
		halted = func(ctx context.Context, h store.Halted) {
			printedHalt(ctx, h)
			postedHalt(ctx, h)
		}
		log.Info("Slack approvals on", "channel", slackCfg.Channel, "interactions", "POST /v1/integrations/slack/interactions")
	}
	expirer := approval.NewService(led, time.Now)
	expirer.Observe(notifications)
	timers := approval.NewTimers(expirer, log)
	defer timers.Stop()
	// The sweep function's backstop, every minute here: overdue approvals
	// and input requests, those of runs that ended, stale reservations.
	inputs := elicitation.NewService(led, time.Now, log)
	inputs.Observe(inputNotifications)
	sweeper := sweep.Sweeper{Approvals: expirer, Inputs: inputs, Reservations: admission.New(led, nil, time.Now),
		ReservationsAfter: cfg.ReservationSweepAfter, Now: time.Now, Log: log}
	go devstack.Ticks(ctx, devstack.Every(ctx, sweepTick, time.Now), func(ctx context.Context, _ time.Time) {
		if _, err := sweeper.Sweep(ctx); err != nil {
			log.WarnContext(ctx, "sweep: a round failed (the next tries again)", "err", err)
		}
	})
	verifier, err := sso.Load(ctx, cfg)
	if err != nil {
		return err
	}
	if verifier != nil {
		log.Info("SSO required: OIDC bearers are verified; the admin token still works for the operator", "issuer", cfg.OIDCIssuer)
	}
	reports := report.New(led, githubapp.New(st, sealer, egress.New(cfg.ConnectionAllowCIDRs), time.Now), time.Now)
	launch, waitRunners, err := devLauncher(*launcherName, *claudeCLI, ln.Addr().String(), led, reports, stdout, log)
	if err != nil {
		return err
	}
	defer waitRunners()
	// OTEL_EXPORTER_OTLP_ENDPOINT turns telemetry on, as on AWS; the SDK
	// reads the other OTEL_* variables itself.
	tel, err := otlp.FromEnv(ctx, getenv, "fluidbox-dev")
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(sctx)
	}()
	runCreated := launchOnCreate(notifier.RunCreated, launch, log)
	h, err := api.Build(api.Config{
		Telemetry:  tel.Telemetry(),
		AdminToken: cfg.AdminToken,
		OIDC:       verifier,
		Ledger:     led,
		Logger:     log,
		Scheduler:  timers,
		Prices:     prices,
		Sealer:     sealer,
		Observer:   notifications,
		Slack:      slackCfg,

		InputObserver: inputNotifications,

		GitHubWebhookSecret: cfg.GitHubWebhookSecret,
		RunCreated:          runCreated,
		Halted:              halted,
		UpstreamToolsTTL:    time.Duration(cfg.UpstreamToolsTTLSeconds) * time.Second,

		MaxPendingApprovals: cfg.MaxPendingApprovals,
		Egress:              egress.New(cfg.ConnectionAllowCIDRs),

		RunRequestsPerMinute: cfg.RunRequestsPerMinute,
		RunMaxOpenRequests:   cfg.RunMaxOpenRequests,
		PublicURL:            cfg.PublicURL,
	})
	if err != nil {
		return err
	}
	// Scheduled triggers: the same firing as the schedule function's,
	// ticked by the wall clock; their runs are launched as a pull
	// request's are.
	schedules := firing.New(firing.Config{Config: route.Config{Ledger: led, Logger: log, Now: time.Now},
		Sealer: sealer, Egress: egress.New(cfg.ConnectionAllowCIDRs), RunCreated: runCreated})
	go devstack.Ticks(ctx, devstack.Every(ctx, scheduleTick, time.Now), func(ctx context.Context, now time.Time) {
		if _, err := schedules.Tick(ctx, now); err != nil {
			log.WarnContext(ctx, "scheduled triggers: a tick failed (the next tries again)", "err", err)
		}
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "fluidbox dev listening on %s\n", url)
	fmt.Fprintf(stdout, "  export FLUIDBOX_URL=%s\n  export FLUIDBOX_ADMIN_TOKEN=%s\n", url, cfg.AdminToken)
	if printedSecret != "" {
		fmt.Fprintf(stdout, "  export FLUIDBOX_GITHUB_WEBHOOK_SECRET=%s\n", printedSecret)
	}
	fmt.Fprintf(stdout, "  curl -s -H \"Authorization: Bearer $FLUIDBOX_ADMIN_TOKEN\" $FLUIDBOX_URL/v1/capabilities\n")
	fmt.Fprintf(stdout, "  model proxy for a run: ANTHROPIC_BASE_URL=$FLUIDBOX_URL/v1/sessions/<id>/model ANTHROPIC_API_KEY=<session token>\n")
	fmt.Fprintf(stdout, "  approvals page: %s/ (paste the admin token)\n", url)
	fmt.Fprintf(stdout, "press Ctrl-C to stop\n")

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return srv.Close()
	}
	return nil
}

// sweepTick is how often the dev server sweeps (the sweep function runs
// every five minutes).
const sweepTick = time.Minute

// scheduleTick is how often the dev server looks for scheduled triggers
// that are due: a cron's resolution is a minute.
const scheduleTick = 15 * time.Second

// newWebhookSecret is a GitHub webhook secret, as `openssl rand -hex 32`.
func newWebhookSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// webhookSecretFile reads the webhook secret kept in name, or generates
// one and creates name with it, readable by its owner only. A file that
// holds something no secret looks like (empty, short, several lines) is
// refused rather than used.
func webhookSecretFile(name string) (string, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		secret, err := newWebhookSecret()
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			return "", err
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", fmt.Errorf("--webhook-secret-file: %w", err)
		}
		if _, err := f.WriteString(secret + "\n"); err != nil {
			f.Close()
			return "", err
		}
		return secret, f.Close()
	}
	if err != nil {
		return "", fmt.Errorf("--webhook-secret-file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if len(secret) < 16 || len(secret) > 1024 || strings.ContainsAny(secret, " \t\r\n") {
		return "", fmt.Errorf("--webhook-secret-file: %s does not hold one secret of at least 16 characters", name)
	}
	return secret, nil
}

func newAdminToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "fbx_admin_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// devModelProxy prepares budget admission and the model proxy for dev: the
// price table (with FLUIDBOX_PRICES_FILE merged over it), a local sealer
// whose key lives outside the repository (in the user's config directory,
// created 0600), and, when FLUIDBOX_MODEL_UPSTREAM_URL and _KEY are set, the
// model upstream sealed and stored as PUT /v1/model-upstream would.
func devModelProxy(ctx context.Context, cfg config.Config, st *store.Store, log *slog.Logger) (*budget.Prices, seal.Sealer, error) {
	prices, err := admission.LoadPrices(cfg.PricesFile)
	if err != nil {
		return nil, nil, err
	}
	sealer, err := devSealer(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	if cfg.ModelUpstreamURL != "" {
		info, err := modelproxy.NewUpstreams(st, sealer, egress.New(cfg.ConnectionAllowCIDRs), time.Now).Set(ctx, cfg.ModelUpstreamURL,
			seal.Credential{Type: seal.TypeHeader, Name: "x-api-key", Value: cfg.ModelUpstreamKey}, string(auth.Dev))
		if err != nil {
			return nil, nil, fmt.Errorf("model upstream from FLUIDBOX_MODEL_UPSTREAM_URL: %w", err)
		}
		log.Info("model upstream sealed and stored", "url", info.URL, "generation", info.Generation)
	}
	return prices, sealer, nil
}

// devSealer is the one sealer of the dev server (model upstream and
// connection credentials alike): KMS when FLUIDBOX_KMS_KEY_ID is set (the
// SDK reads AWS_ENDPOINT_URL_KMS, e.g. a local-kms), else the local
// AES-GCM sealer whose key lives outside the repository, in the user's
// config directory, created 0600 on first run.
func devSealer(ctx context.Context, cfg config.Config, log *slog.Logger) (seal.Sealer, error) {
	if cfg.KMSKeyID != "" {
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("dev sealer: aws config: %w", err)
		}
		awsCfg.APIOptions = append(awsCfg.APIOptions, store.BodyWithoutWriteTo)
		log.Info("sealing with KMS", "key", cfg.KMSKeyID)
		return seal.NewKMS(kms.NewFromConfig(awsCfg), cfg.KMSKeyID), nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return nil, fmt.Errorf("dev sealer: no user config directory for its key: %w", err)
	}
	path := filepath.Join(dir, "fluidbox", "dev-seal.key")
	sealer, err := seal.NewLocal(path)
	if err != nil {
		return nil, fmt.Errorf("dev sealer: %w", err)
	}
	log.Info("sealing with a local key (FLUIDBOX_KMS_KEY_ID unset)", "key_file", path)
	return sealer, nil
}

// bothTransitions is an observer of transitions (before, after) that tells
// first, then second.
func bothTransitions[T any](first, second func(ctx context.Context, before, after T)) func(ctx context.Context, before, after T) {
	return func(ctx context.Context, before, after T) {
		first(ctx, before, after)
		second(ctx, before, after)
	}
}
