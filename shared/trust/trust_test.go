package trust

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTierValid(t *testing.T) {
	t.Parallel()
	for tier, want := range map[Tier]bool{Trusted: true, ReadOnly: true, "": false, "readonly": false, "TRUSTED": false} {
		if got := tier.Valid(); got != want {
			t.Errorf("Tier(%q).Valid() = %v, want %v", tier, got, want)
		}
	}
}

func TestNarrow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		requested, derived, want Tier
	}{
		{"", Trusted, Trusted},
		{Trusted, Trusted, Trusted},
		{ReadOnly, Trusted, ReadOnly},
		{Trusted, ReadOnly, ReadOnly}, // nobody can widen
		{"", ReadOnly, ReadOnly},
		{ReadOnly, ReadOnly, ReadOnly},
		{"admin", Trusted, ReadOnly}, // unknown request: narrowest
		{Trusted, "", ReadOnly},      // unknown derivation: narrowest
		{Trusted, "trusted ", ReadOnly},
	}
	for _, tt := range tests {
		if got := Narrow(tt.requested, tt.derived); got != tt.want {
			t.Errorf("Narrow(%q, %q) = %q, want %q", tt.requested, tt.derived, got, tt.want)
		}
	}
}

func readPayload(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFromPullRequestRealPayloads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want PullRequest
	}{
		{"same_repo.opened.json", PullRequest{
			Action: "opened", BaseRepo: "Codertocat/Hello-World", HeadRepo: "Codertocat/Hello-World",
			Number: 2, HeadSHA: "ec26c3e57ca3a959ca5aad62de7213c562f8c821", Tier: Trusted, Fork: false, Author: "21031067",
		}},
		{"fork.opened.json", PullRequest{
			Action: "opened", BaseRepo: "KaTeX/KaTeX", HeadRepo: "KaTeX-bot/KaTeX",
			Number: 2388, HeadSHA: "3ae9c36f8a03c1bd7e352bc683f72943dc92422e", Tier: ReadOnly, Fork: true, Author: "33710906",
		}},
		{"fork.synchronize.json", PullRequest{
			Action: "synchronize", BaseRepo: "KaTeX/KaTeX", HeadRepo: "KaTeX-bot/KaTeX",
			Number: 2388, HeadSHA: "a3404550c2465df195b4c7e2081f74dd5a7aced6", Tier: ReadOnly, Fork: true, Author: "33710906",
		}},
		// A branch PR inside a repository that is itself a fork: the head
		// repository "is a fork", so the rule says read_only.
		{"fork_flagged_same_repo.opened.json", PullRequest{
			Action: "opened", BaseRepo: "bradrydzewski/drone-test-go", HeadRepo: "bradrydzewski/drone-test-go",
			Number: 1, HeadSHA: "d2b75aa7797ec26b088fa2dd527e9d2c052fcedd", Tier: ReadOnly, Fork: true, Author: "817538",
		}},
		{"deleted_fork.opened.json", PullRequest{
			Action: "opened", BaseRepo: "KaTeX/KaTeX", HeadRepo: "",
			Number: 2388, HeadSHA: "3ae9c36f8a03c1bd7e352bc683f72943dc92422e", Tier: ReadOnly, Fork: true, Author: "33710906",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			got, err := FromPullRequest(readPayload(t, tt.file))
			if err != nil {
				t.Fatalf("FromPullRequest(%s) = %v", tt.file, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromPullRequest(%s) (-want +got):\n%s", tt.file, diff)
			}
		})
	}
}

// mutate decodes the same-repo payload, applies f, and re-encodes it.
func mutate(t *testing.T, f func(p map[string]any)) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(readPayload(t, "same_repo.opened.json"), &p); err != nil {
		t.Fatal(err)
	}
	f(p)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func obj(p map[string]any, path ...string) map[string]any {
	for _, k := range path {
		p = p[k].(map[string]any)
	}
	return p
}

func TestFromPullRequestFailsTowardFork(t *testing.T) {
	t.Parallel()
	tests := map[string]func(p map[string]any){
		"head repo other full_name":   func(p map[string]any) { obj(p, "pull_request", "head", "repo")["full_name"] = "Attacker/Hello-World" },
		"head repo other id":          func(p map[string]any) { obj(p, "pull_request", "head", "repo")["id"] = 1 },
		"head repo name differs case": func(p map[string]any) { obj(p, "pull_request", "head", "repo")["full_name"] = "codertocat/hello-world" },
		"head repo fork true":         func(p map[string]any) { obj(p, "pull_request", "head", "repo")["fork"] = true },
		"head repo fork missing":      func(p map[string]any) { delete(obj(p, "pull_request", "head", "repo"), "fork") },
		"head repo id missing":        func(p map[string]any) { delete(obj(p, "pull_request", "head", "repo"), "id") },
		"head repo full_name missing": func(p map[string]any) { delete(obj(p, "pull_request", "head", "repo"), "full_name") },
		"head repo null":              func(p map[string]any) { obj(p, "pull_request", "head")["repo"] = nil },
		"head repo absent":            func(p map[string]any) { delete(obj(p, "pull_request", "head"), "repo") },
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := FromPullRequest(mutate(t, f))
			if err != nil {
				t.Fatalf("FromPullRequest = %v", err)
			}
			if got.Tier != ReadOnly || !got.Fork {
				t.Errorf("FromPullRequest: Tier %q Fork %v, want read_only and fork", got.Tier, got.Fork)
			}
		})
	}
}

func TestFromPullRequestMalformed(t *testing.T) {
	t.Parallel()
	tests := map[string][]byte{
		"empty":               []byte(``),
		"not json":            []byte(`{"action":`),
		"array":               []byte(`[]`),
		"null":                []byte(`null`),
		"empty object":        []byte(`{}`),
		"no action":           mutate(t, func(p map[string]any) { delete(p, "action") }),
		"action not string":   mutate(t, func(p map[string]any) { p["action"] = 1 }),
		"no pull_request":     mutate(t, func(p map[string]any) { delete(p, "pull_request") }),
		"pull_request null":   mutate(t, func(p map[string]any) { p["pull_request"] = nil }),
		"no head":             mutate(t, func(p map[string]any) { delete(obj(p, "pull_request"), "head") }),
		"bad head sha":        mutate(t, func(p map[string]any) { obj(p, "pull_request", "head")["sha"] = "main" }),
		"no base repo":        mutate(t, func(p map[string]any) { obj(p, "pull_request", "base")["repo"] = nil }),
		"base repo no id":     mutate(t, func(p map[string]any) { delete(obj(p, "pull_request", "base", "repo"), "id") }),
		"fork as string":      mutate(t, func(p map[string]any) { obj(p, "pull_request", "head", "repo")["fork"] = "false" }),
		"no number":           mutate(t, func(p map[string]any) { delete(p, "number"); delete(obj(p, "pull_request"), "number") }),
		"numbers disagree":    mutate(t, func(p map[string]any) { p["number"] = 3 }),
		"number zero":         mutate(t, func(p map[string]any) { p["number"] = 0; obj(p, "pull_request")["number"] = 0 }),
		"repository not base": mutate(t, func(p map[string]any) { obj(p, "repository")["full_name"] = "Other/Repo" }),
		"repository other id": mutate(t, func(p map[string]any) { obj(p, "repository")["id"] = 7 }),
		"number not a number": mutate(t, func(p map[string]any) { p["number"] = "2" }),
		"head sha upper case": mutate(t, func(p map[string]any) {
			obj(p, "pull_request", "head")["sha"] = "EC26C3E57CA3A959CA5AAD62DE7213C562F8C821"
		}),
		"base full_name empty": mutate(t, func(p map[string]any) { obj(p, "pull_request", "base", "repo")["full_name"] = "" }),
	}
	for name, payload := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := FromPullRequest(payload)
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("FromPullRequest = %+v, %v; want ErrMalformed", got, err)
			}
		})
	}
}

func FuzzFromPullRequest(f *testing.F) {
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".json" {
			b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(`{"action":"opened","number":1,"pull_request":{"head":{"sha":"0000000000000000000000000000000000000000","repo":{"id":1,"full_name":"a/b","fork":false}},"base":{"repo":{"id":1,"full_name":"a/b"}}}}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		pr, err := FromPullRequest(payload)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if !pr.Tier.Valid() || (pr.Tier == ReadOnly) != pr.Fork {
			t.Fatalf("Tier %q inconsistent with Fork %v", pr.Tier, pr.Fork)
		}
		if pr.Tier == Trusted && (pr.HeadRepo == "" || pr.HeadRepo != pr.BaseRepo) {
			t.Fatalf("trusted with head %q base %q", pr.HeadRepo, pr.BaseRepo)
		}
		if pr.Number <= 0 || pr.Action == "" {
			t.Fatalf("accepted %+v", pr)
		}
	})
}
