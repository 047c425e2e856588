package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
)

// buildInfo is what `fluidbox version` reports, from the binary's own
// build information (go build and go install stamp the module version and
// the VCS revision; go run and tests have less).
type buildInfo struct {
	Module    string `json:"module"`
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	CommitAt  string `json:"commit_time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

func readBuildInfo(read func() (*debug.BuildInfo, bool)) buildInfo {
	bi, ok := read()
	if !ok {
		return buildInfo{Version: "unknown"}
	}
	out := buildInfo{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if out.Version == "" {
		out.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Commit = s.Value
		case "vcs.time":
			out.CommitAt = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}

func version(_ context.Context, args []string, e cmdEnv) error {
	fs := newFlagSet("version", e.stderr, "version [--json]")
	out := addOutFlags(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	bi := readBuildInfo(debug.ReadBuildInfo)
	if out.json {
		return out.write(e.stdout, bi)
	}
	line := "fluidbox " + bi.Version
	if bi.Commit != "" {
		line += " commit " + bi.Commit
		if bi.Modified {
			line += " (modified)"
		}
	}
	_, err = fmt.Fprintf(e.stdout, "%s %s\n", line, bi.GoVersion)
	return err
}

// completion prints a completion script for a shell, generated from the
// command table: commands, then each command's subcommands and flags.
func completion(_ context.Context, args []string, e cmdEnv) error {
	fs := newFlagSet("completion", e.stderr, "completion bash|zsh|fish")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one shell: bash, zsh or fish")
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	var b strings.Builder
	switch fs.Arg(0) {
	case "bash":
		b.WriteString("# fluidbox completion for bash: source <(fluidbox completion bash)\n_fluidbox() {\n  local cur=${COMP_WORDS[COMP_CWORD]}\n  if [ \"$COMP_CWORD\" -eq 1 ]; then\n")
		fmt.Fprintf(&b, "    COMPREPLY=($(compgen -W %q -- \"$cur\"))\n    return\n  fi\n  case ${COMP_WORDS[1]} in\n", strings.Join(names, " "))
		for _, c := range commands {
			if len(c.words) > 0 {
				fmt.Fprintf(&b, "    %s) COMPREPLY=($(compgen -W %q -- \"$cur\")) ;;\n", c.name, strings.Join(c.words, " "))
			}
		}
		b.WriteString("  esac\n}\ncomplete -o default -F _fluidbox fluidbox\n")
	case "zsh":
		b.WriteString("#compdef fluidbox\n# fluidbox completion for zsh: fluidbox completion zsh > \"${fpath[1]}/_fluidbox\"\n_fluidbox() {\n  if (( CURRENT == 2 )); then\n")
		fmt.Fprintf(&b, "    compadd -- %s\n    return\n  fi\n  case $words[2] in\n", strings.Join(names, " "))
		for _, c := range commands {
			if len(c.words) > 0 {
				fmt.Fprintf(&b, "    %s) compadd -- %s ;;\n", c.name, strings.Join(c.words, " "))
			}
		}
		b.WriteString("  esac\n  _files\n}\ncompdef _fluidbox fluidbox\n")
	case "fish":
		b.WriteString("# fluidbox completion for fish: fluidbox completion fish > ~/.config/fish/completions/fluidbox.fish\n")
		for _, c := range commands {
			fmt.Fprintf(&b, "complete -c fluidbox -n __fish_use_subcommand -a %s -d %q\n", c.name, c.summary)
		}
		for _, c := range commands {
			for _, w := range c.words {
				if l, ok := strings.CutPrefix(w, "--"); ok {
					fmt.Fprintf(&b, "complete -c fluidbox -n '__fish_seen_subcommand_from %s' -l %s\n", c.name, l)
				} else if s, ok := strings.CutPrefix(w, "-"); ok {
					fmt.Fprintf(&b, "complete -c fluidbox -n '__fish_seen_subcommand_from %s' -s %s\n", c.name, s)
				} else {
					fmt.Fprintf(&b, "complete -c fluidbox -n '__fish_seen_subcommand_from %s' -a %s\n", c.name, w)
				}
			}
		}
	default:
		return usagef("unknown shell %q: want bash, zsh or fish", fs.Arg(0))
	}
	_, err := fmt.Fprint(e.stdout, b.String())
	return err
}
