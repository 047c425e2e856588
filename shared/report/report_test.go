package report_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/fluidbox/fluidbox/shared/report"
	"github.com/fluidbox/fluidbox/shared/store"
)

// checkNeutral fails unless out is safe to post: valid UTF-8, no HTML
// metacharacter, no NUL, and every '@' followed by the zero-width joiner.
func checkNeutral(t *testing.T, in, out string) {
	t.Helper()
	if !utf8.ValidString(out) || strings.ContainsAny(out, "<>\x00") {
		t.Fatalf("Neutralise(%q) = %q: invalid UTF-8, an HTML metacharacter or NUL", in, out)
	}
	for i := strings.IndexByte(out, '@'); i >= 0; i = strings.IndexByte(out, '@') {
		if !strings.HasPrefix(out[i+1:], "\u200d") {
			t.Fatalf("Neutralise(%q) = %q: an '@' not followed by U+200D", in, out)
		}
		out = out[i+1:]
	}
}

func TestNeutralise(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"LGTM @octocat":            "LGTM @\u200doctocat",
		"<script>x</script>":       "&lt;script&gt;x&lt;/script&gt;",
		"a &amp; b":                "a &amp;amp; b",
		"bad\xffutf8\x00":          "badutf8",
		"@@":                       "@\u200d@\u200d",
		"plain text, `code` # 12.": "plain text, `code` # 12.",
	} {
		if got := report.Neutralise(in); got != want {
			t.Errorf("Neutralise(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBodyBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é@<", 50000)
	b := report.Body("ses_x", store.Result{Reason: "exited", FinalMessage: long})
	if len(b) > report.MaxBody || !utf8.ValidString(b) || !strings.HasSuffix(b, "_(cut: the message was longer)_") {
		t.Errorf("Body of a long message: %d bytes (max %d), valid %v, suffix %q", len(b), report.MaxBody, utf8.ValidString(b), b[len(b)-40:])
	}
	if b := report.Body("ses_x", store.Result{Reason: "failed", ExitStatus: -1}); !strings.Contains(b, "failed, exit status -1") || !strings.Contains(b, "no final message") {
		t.Errorf("Body without a message = %q", b)
	}
}

func FuzzNeutralise(f *testing.F) {
	for _, s := range []string{"@a", "<b>", "&", "\x00", "\xff@", "@\u200d", "＠x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := report.Neutralise(in)
		checkNeutral(t, in, out)
		b := report.Body("ses_x", store.Result{Reason: "exited", FinalMessage: in})
		if len(b) > report.MaxBody {
			t.Fatalf("Body(%q) is %d bytes, over %d", in, len(b), report.MaxBody)
		}
	})
}
