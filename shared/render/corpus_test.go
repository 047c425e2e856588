package render_test

import (
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluidbox/fluidbox/shared/render"
)

var update = flag.Bool("update", false, "rewrite the wants of testdata/corpus.json from this package's output")

// Corpus is testdata/corpus.json: cases with the rendering each must give.
// The page's script renders the same cases in the browser test
// (cmd/fluidbox, make e2e-browser) and must give the same answers.
type Corpus struct {
	Calls []struct {
		Name  string      `json:"name"`
		Tool  string      `json:"tool"`
		Input string      `json:"input"`
		Want  render.View `json:"want"`
	} `json:"calls"`
	Clips []struct {
		Name     string         `json:"name"`
		Text     string         `json:"text"`
		Lines    bool           `json:"lines"`
		MaxChars int            `json:"max_chars"`
		MaxLines int            `json:"max_lines"`
		Want     render.Clipped `json:"want"`
		Notice   string         `json:"notice"`
	} `json:"clips"`
	Scopes []struct {
		ScopeKey     string        `json:"scope_key"`
		RunID        string        `json:"run_id"`
		DefaultScope string        `json:"default_scope"`
		Want         render.Scopes `json:"want"`
	} `json:"scopes"`
}

const corpusFile = "testdata/corpus.json"

func TestCorpus(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(corpusFile)
	if err != nil {
		t.Fatal(err)
	}
	var c Corpus
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	for i, k := range c.Calls {
		got := render.Call(k.Tool, []byte(k.Input))
		if *update {
			c.Calls[i].Want = got
		} else if diff := cmp.Diff(k.Want, got); diff != "" {
			t.Errorf("Call(%s) (-want +got):\n%s", k.Name, diff)
		}
	}
	for i, k := range c.Clips {
		rendered := render.Line(k.Text)
		if k.Lines {
			rendered = render.Block(k.Text)
		}
		got := render.Clip(rendered, k.MaxChars, k.MaxLines)
		if *update {
			c.Clips[i].Want, c.Clips[i].Notice = got, got.Notice()
		} else if diff := cmp.Diff(k.Want, got); diff != "" || got.Notice() != k.Notice {
			t.Errorf("Clip(%s) (-want +got):\n%s\nnotice %q, want %q", k.Name, diff, got.Notice(), k.Notice)
		}
	}
	for i, k := range c.Scopes {
		got := render.Scope(k.ScopeKey, k.RunID, k.DefaultScope)
		if *update {
			c.Scopes[i].Want = got
		} else if diff := cmp.Diff(k.Want, got); diff != "" {
			t.Errorf("Scope(%q) (-want +got):\n%s", k.ScopeKey, diff)
		}
	}
	if *update {
		out, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(corpusFile, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
