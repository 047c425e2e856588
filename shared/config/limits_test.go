package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/config"
)

// TestConnectionAllowAndRateLimit: the allowed ranges default to loopback
// in dev only, a value replaces that default, and bad values are reported.
func TestConnectionAllowAndRateLimit(t *testing.T) {
	t.Parallel()
	get := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	base := map[string]string{"FLUIDBOX_TABLE": "t", "FLUIDBOX_ADMIN_TOKEN": "0123456789abcdef0123"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range base {
			m[a] = b
		}
		return m
	}
	dev, err := config.Load(get(base), config.Dev)
	if err != nil || fmt.Sprint(dev.ConnectionAllowCIDRs) != "[127.0.0.0/8 ::1/128]" {
		t.Errorf("dev default = %v, %v; want loopback", dev.ConnectionAllowCIDRs, err)
	}
	lambda, err := config.Load(get(base), config.Lambda)
	if err != nil || len(lambda.ConnectionAllowCIDRs) != 0 || lambda.RunRequestsPerMinute != 0 {
		t.Errorf("Lambda default = %v, %d, %v; want none and 0", lambda.ConnectionAllowCIDRs, lambda.RunRequestsPerMinute, err)
	}
	set, err := config.Load(get(with("FLUIDBOX_CONNECTION_ALLOW_CIDRS", "10.1.0.0/16, 192.168.4.7")), config.Dev)
	if err != nil || fmt.Sprint(set.ConnectionAllowCIDRs) != "[10.1.0.0/16 192.168.4.7/32]" {
		t.Errorf("dev with ranges set = %v, %v; want exactly those (no loopback)", set.ConnectionAllowCIDRs, err)
	}
	if c, err := config.Load(get(with("FLUIDBOX_RUN_REQUESTS_PER_MINUTE", "120")), config.Lambda); err != nil || c.RunRequestsPerMinute != 120 {
		t.Errorf("rate 120 = %d, %v", c.RunRequestsPerMinute, err)
	}
	if c, err := config.Load(get(with("FLUIDBOX_RUN_MAX_OPEN_REQUESTS", "4")), config.Lambda); err != nil || c.RunMaxOpenRequests != 4 {
		t.Errorf("max open requests 4 = %d, %v", c.RunMaxOpenRequests, err)
	}
	if c, err := config.Load(get(with("FLUIDBOX_MAX_PENDING_APPROVALS", "5")), config.Lambda); err != nil || c.MaxPendingApprovals != 5 {
		t.Errorf("max pending approvals 5 = %d, %v", c.MaxPendingApprovals, err)
	}
	for k, v := range map[string]string{
		"FLUIDBOX_CONNECTION_ALLOW_CIDRS":  "10.0.0.0/33",
		"FLUIDBOX_RUN_REQUESTS_PER_MINUTE": "0",
		"FLUIDBOX_MAX_PENDING_APPROVALS":   "1001",
		"FLUIDBOX_RUN_MAX_OPEN_REQUESTS":   "0",
	} {
		if _, err := config.Load(get(with(k, v)), config.Lambda); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s = %v, want an error naming it", k, v, err)
		}
	}
	if _, err := config.Load(get(with("FLUIDBOX_RUN_REQUESTS_PER_MINUTE", "many")), config.Lambda); err == nil {
		t.Error("a non-number rate was accepted")
	}
	if _, err := config.Load(get(with("FLUIDBOX_MAX_PENDING_APPROVALS", "0")), config.Lambda); err == nil {
		t.Error("a limit of 0 pending approvals was accepted")
	}
}

// TestSequencer: dev numbers events in the background unless
// FLUIDBOX_SEQUENCER=read; any other value is refused.
func TestSequencer(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"": false, "background": false, "read": true} {
		c, err := config.Load(func(k string) string {
			if k == "FLUIDBOX_SEQUENCER" {
				return v
			}
			return ""
		}, config.Dev)
		if err != nil || c.SequenceOnRead != want {
			t.Errorf("FLUIDBOX_SEQUENCER=%q: SequenceOnRead = %v, %v; want %v", v, c.SequenceOnRead, err, want)
		}
	}
	if _, err := config.Load(func(k string) string {
		if k == "FLUIDBOX_SEQUENCER" {
			return "stream"
		}
		return ""
	}, config.Dev); err == nil || !strings.Contains(err.Error(), "FLUIDBOX_SEQUENCER") {
		t.Errorf("FLUIDBOX_SEQUENCER=stream: %v, want refused", err)
	}
}
