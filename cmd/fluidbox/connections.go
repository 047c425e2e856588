package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"runtime"
)

// connections is `fluidbox connections authorize ID [--open]`: it asks for
// an OAuth connection's authorization URL and prints it; with --open it
// also hands it to the platform's browser opener.
func connections(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		c, _ := lookup("connections")
		fmt.Fprint(stderr, commandHelp(c))
		if len(args) == 0 {
			return usagef("want a subcommand: authorize")
		}
		return nil
	}
	if args[0] != "authorize" {
		return usagef("unknown subcommand %q: want authorize", args[0])
	}
	fs := newFlagSet("connections authorize", stderr, "connections authorize ID [--open] [--json] [--url URL] [--token TOKEN]")
	f := addAPIFlags(fs, getenv)
	open := fs.Bool("open", false, "also open the URL in a browser")
	pos, err := parseArgs(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one connection id or name")
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	a, err := c.AuthorizeConnection(ctx, pos[0])
	if err != nil {
		return explain(err)
	}
	u, err := url.Parse(a.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		// Printed or opened, a URL of another scheme could run something.
		return errors.New("the server answered with an authorization URL that is not http(s)")
	}
	if f.json {
		return f.write(stdout, a)
	}
	if _, err := fmt.Fprintf(stdout, "Open this URL to authorize the connection (valid until %s):\n%s\n", clock(a.ExpiresAt), u.String()); err != nil {
		return err
	}
	if *open {
		if err := openBrowser(ctx, u.String()); err != nil {
			fmt.Fprintf(stderr, "could not open a browser (%v); open the URL above yourself\n", err)
		}
	}
	return nil
}

// openBrowser starts the platform's URL opener with the URL as its one
// argument (no shell).
func openBrowser(ctx context.Context, u string) error {
	name := "xdg-open"
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		return errors.New("not supported on windows")
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return err
	}
	return exec.CommandContext(ctx, path, u).Start()
}
