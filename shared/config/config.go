// Package config reads fluidbox's environment (API.md, "Environment of the
// server") into one typed value, reporting every problem at once. Only
// mains call it; nothing else in shared/ reads the environment.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Config is the server's configuration.
type Config struct {
	// Addr is where `fluidbox dev` listens.
	Addr string
	// AdminToken is the operator's bearer token.
	AdminToken string
	// Table is the DynamoDB table.
	Table string
	// DynamoDBEndpoint overrides the SDK's endpoint (AWS_ENDPOINT_URL_DYNAMODB).
	DynamoDBEndpoint string
	// UpstreamToolsTTLSeconds is how long the broker may trust its last
	// look at an upstream's tool list.
	UpstreamToolsTTLSeconds int
}

// Mode says which defaults apply.
type Mode int

const (
	// Lambda: every required variable must be set.
	Lambda Mode = iota
	// Dev: local defaults fill the gaps.
	Dev
)

// Load reads the configuration through getenv.
func Load(getenv func(string) string, mode Mode) (Config, error) {
	var problems []string
	c := Config{
		Addr:             getenv("FLUIDBOX_ADDR"),
		AdminToken:       getenv("FLUIDBOX_ADMIN_TOKEN"),
		Table:            getenv("FLUIDBOX_TABLE"),
		DynamoDBEndpoint: getenv("AWS_ENDPOINT_URL_DYNAMODB"),
	}
	if s := getenv("FLUIDBOX_UPSTREAM_TOOLS_TTL_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			problems = append(problems, "FLUIDBOX_UPSTREAM_TOOLS_TTL_SECONDS must be a non-negative integer")
		}
		c.UpstreamToolsTTLSeconds = n
	}
	switch mode {
	case Dev:
		if c.Addr == "" {
			c.Addr = "127.0.0.1:8080"
		}
		if c.Table == "" {
			c.Table = "fluidbox"
		}
	case Lambda:
		if c.Table == "" {
			problems = append(problems, "FLUIDBOX_TABLE is not set")
		}
		if c.AdminToken == "" {
			problems = append(problems, "FLUIDBOX_ADMIN_TOKEN is not set")
		}
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		problems = append(problems, "FLUIDBOX_ADMIN_TOKEN must be at least 16 characters")
	}
	if len(problems) > 0 {
		return Config{}, fmt.Errorf("config: %w", errors.New(strings.Join(problems, "; ")))
	}
	return c, nil
}
