package bash

import (
	"strings"
	"testing"

	"github.com/bmatcuk/doublestar/v4"
)

// Every entry of the protected list is well formed: its glob compiles and
// matches its example at any depth, its name is a literal segment of the
// glob (what a naming rule must hold), and it says which program obeys it
// and why.
func TestProtectedEntries(t *testing.T) {
	t.Parallel()
	for _, p := range ProtectedPaths() {
		if !doublestar.ValidatePattern(p.Glob) || !strings.HasPrefix(p.Glob, "**/") {
			t.Errorf("%s: glob must be valid and start with **/", p.Glob)
		}
		if ok, _ := doublestar.Match(p.Glob, p.Example); !ok {
			t.Errorf("%s does not match its example %q", p.Glob, p.Example)
		}
		if !strings.Contains("/"+p.Glob+"/", "/"+p.Name+"/") {
			t.Errorf("%s: name %q is not a segment of the glob", p.Glob, p.Name)
		}
		if p.Program == "" || p.Why == "" {
			t.Errorf("%s: program and why are required", p.Glob)
		}
	}
}

// Writes reads what a line may write: redirections, the words of commands
// the catalogue does not accept, and writers whose targets are unseen.
func TestWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line   string
		want   []string // texts among the targets
		unseen bool
	}{
		{"echo x > .git/config", []string{".git/config"}, false},
		{"echo x >& .bashrc", []string{".bashrc"}, false},
		{"cd sub && echo x >> out", []string{"sub/out"}, false},
		{"cd \"$D\" && echo x > config", []string{"config"}, false},
		{"tee -a ~/.bashrc", []string{"~/.bashrc"}, false},
		{"dd if=x of=.git/config", []string{".git/config"}, false},
		{"install -t.git/hooks x", []string{".git/hooks"}, false},
		{"gunzip .bashrc.gz", []string{".bashrc"}, false},
		{"bash -c 'echo x > .mcp.json'", []string{".mcp.json"}, false},
		{"tar xf a.tar", nil, true},
		{"unzip a.zip", nil, true},
		{"git config core.pager less", nil, true},
		{"npm config set script-shell x", nil, true},
		{"rsync -a host:dir/ .", nil, true},
		{"wget -r https://example.com/", nil, true},
		{"wget --mirror https://example.com/", nil, true},
		{"curl -OJ https://example.com/x", nil, true},
		{"curl --remote-header-name -O https://example.com/x", nil, true},
	}
	for _, tt := range tests {
		targets, unseen := Analyze(tt.line).Writes()
		if (unseen != "") != tt.unseen {
			t.Errorf("Writes(%q) unseen = %q, want %v", tt.line, unseen, tt.unseen)
		}
		for _, w := range tt.want {
			found := false
			for _, tg := range targets {
				found = found || tg.Text == w
			}
			if !found {
				t.Errorf("Writes(%q) = %+v, want a target %q", tt.line, targets, w)
			}
		}
	}
	// Catalogue commands write nothing, whatever their words name.
	for _, line := range []string{"cat .git/config", "git diff .gitattributes", "ls -la ~/.claude", "grep -r x .git/hooks", "git config --get core.pager"} {
		if targets, unseen := Analyze(line).Writes(); len(targets) != 0 || unseen != "" {
			t.Errorf("Writes(%q) = %+v %q, want nothing", line, targets, unseen)
		}
	}
	// Listing an archive or reading a setting writes nothing unseen.
	for _, line := range []string{"tar tf a.tar", "unzip -l a.zip", "npm config get registry", "rsync -a src/ dst/",
		"curl -O https://example.com/x", "wget https://example.com/x"} {
		if _, unseen := Analyze(line).Writes(); unseen != "" {
			t.Errorf("Writes(%q) unseen = %q, want none", line, unseen)
		}
	}
}

// GitTreeWrite: git writes the working tree from a patch, another
// revision or another repository, so the names it writes are not on the
// line; the forms that leave the tree alone do not.
func TestGitTreeWrite(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		"git apply p.diff",
		"git -C sub am p.mbox",
		"git checkout other",
		"git checkout -b feature origin/x",
		"git switch other",
		"git merge other",
		"git pull",
		"git rebase main",
		"git cherry-pick abc",
		"git revert abc",
		"git reset --hard abc",
		"git reset --keep abc",
		"git restore --source=abc .",
		"git stash pop",
		"git stash",
		"git read-tree -u -m abc",
		"git checkout-index -a",
		"git worktree add ../w",
		"git clone https://example.com/r.git",
		"git init --template=t",
		"git submodule update --init",
		"git sparse-checkout set a",
		"git bisect start",
		"git $SUB x",
	} {
		if Analyze(line).GitTreeWrite() == "" {
			t.Errorf("GitTreeWrite(%q) = \"\", want a write", line)
		}
	}
	for _, line := range []string{"git apply --check p.diff", "git apply --stat p.diff", "git checkout -b feature", "git switch -c feature",
		"git reset HEAD~1", "git reset --soft HEAD~1", "git stash list", "git stash show -p", "git worktree list", "git submodule status",
		"git add .", "git commit -m x", "git push", "git fetch", "git status", "git diff", "cat checkout"} {
		if why := Analyze(line).GitTreeWrite(); why != "" {
			t.Errorf("GitTreeWrite(%q) = %q, want none", line, why)
		}
	}
}
