package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/approval"
	"github.com/fluidbox/fluidbox/shared/config"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/store"
)

// dev runs the local control plane: the same API handler the Lambda
// functions serve, on loopback, over an embedded DynamoDB-API server unless
// AWS_ENDPOINT_URL_DYNAMODB points at one.
func dev(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
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
	led := ledger.New(st, time.Now)
	timers := approval.NewTimers(approval.NewService(led, time.Now), log)
	defer timers.Stop()
	h := api.New(api.Config{
		AdminToken: cfg.AdminToken,
		Ledger:     led,
		Logger:     log,
		Scheduler:  timers,
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "fluidbox dev listening on %s\n", url)
	fmt.Fprintf(stdout, "  export FLUIDBOX_URL=%s\n  export FLUIDBOX_ADMIN_TOKEN=%s\n", url, cfg.AdminToken)
	fmt.Fprintf(stdout, "  curl -s -H \"Authorization: Bearer $FLUIDBOX_ADMIN_TOKEN\" $FLUIDBOX_URL/v1/capabilities\n")
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

func newAdminToken() (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "fbx_admin_" + base64.RawURLEncoding.EncodeToString(b[:]), nil
}
