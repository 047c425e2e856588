package scriptedmodel

import "testing"

// TestSequence: a Sequence answers its steps in order, then its last one
// again, whoever calls it.
func TestSequence(t *testing.T) {
	t.Parallel()
	seq := Sequence(SayText("one"), SayText("two"))
	for i, want := range []string{"one", "two", "two"} {
		if got := seq(Request{}).Text; got != want {
			t.Errorf("request %d: %q, want %q", i, got, want)
		}
	}
}
