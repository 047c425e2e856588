//go:build e2e

package agentsdk

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestCanUseToolOnlyHalts: an app wired with the adapter's canUseTool
// alone (no PreToolUse hook) lets Claude Code run a Read unasked, as its
// own rules allow a read; the model proxy refuses the request carrying the
// Read's result and halts the run, so the file's content never reaches
// the model and nothing more is forwarded.
func TestCanUseToolOnlyHalts(t *testing.T) {
	t.Parallel()
	const canary = "CANARY-CANUSETOOL-READ-93d2"
	dir := project(t, map[string]string{"notes.txt": canary + "\n"})
	s := newStack(t,
		call("toolu_unasked_read", "Read", map[string]any{"file_path": filepath.Join(dir, "notes.txt")}),
		scriptedmodel.SayText("this step must never be reached"),
	)
	r := s.NewRun(t, governed, nil)
	res, err := s.start(t, r, dir, "read notes.txt", opts{canUseToolOnly: true})()
	if err != nil && res.Result == nil {
		t.Fatalf("the driver failed before a result: %v", err)
	}
	if len(res.Decisions) != 0 {
		t.Errorf("the adapter was asked %+v; the Read should have run without it", res.Decisions)
	}
	if s.Model.Remaining() != 1 {
		t.Errorf("%d script steps left, want 1: the request carrying the unasked result was forwarded", s.Model.Remaining())
	}
	for i, req := range s.Model.Requests() {
		if bytes.Contains(req.Body, []byte(canary)) {
			t.Errorf("upstream request %d carried the unasked read's result", i)
		}
	}
	halted := 0
	for _, e := range s.Events(t, r) {
		if e.Type != "run.halted" {
			continue
		}
		halted++
		var d map[string]string
		if err := json.Unmarshal(e.Data, &d); err != nil || d["tool_call_id"] != "toolu_unasked_read" || d["reason"] != "unasked" {
			t.Errorf("run.halted = %s, want toolu_unasked_read, unasked", e.Data)
		}
	}
	if halted != 1 {
		t.Errorf("%d run.halted, want 1", halted)
	}
	if ses, err := s.Admin.Session(t.Context(), r.ID); err != nil || ses.Status != vocab.Ended {
		t.Errorf("run after the halt: %+v, %v; want ended", ses, err)
	}
}
