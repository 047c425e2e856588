//go:build e2e

package claudecode

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/fluidbox/fluidbox/shared/internal/e2e/controlplane"
	"github.com/fluidbox/fluidbox/shared/internal/scriptedmodel"
	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestNoHookHalts: Claude Code run with settings that have no hook (the
// project's .claude/settings.json left out, nothing in managed settings)
// reads a file unasked, as its own rules let it; the model proxy refuses
// the request carrying that result, halts the run, and forwards nothing
// more: the file's content never reaches the model.
func TestNoHookHalts(t *testing.T) {
	t.Parallel()
	const canary = "CANARY-UNASKED-READ-5e1f"
	dir := controlplane.Project(t, map[string]string{"notes.txt": canary + "\n"})
	s := newStack(t,
		call("toolu_unasked", "Read", map[string]any{"file_path": filepath.Join(dir, "notes.txt")}),
		scriptedmodel.SayText("this step must never be reached"),
	)
	r := s.NewRun(t, governed, nil)
	res := s.claude(t, r, dir, "read notes.txt", cliOpts{})

	if s.Model.Remaining() != 1 {
		t.Errorf("%d script steps left, want 1: the request carrying the unasked result was forwarded", s.Model.Remaining())
	}
	for i, req := range s.Model.Requests() {
		if bytes.Contains(req.Body, []byte(canary)) || bytes.Contains(req.Body, []byte(`"tool_use_id":"toolu_unasked"`)) {
			t.Errorf("upstream request %d carried the unasked read's result", i)
		}
	}
	v := s.Ledger(t, r)
	if v.Count["run.halted"] != 1 || v.Count["session.ended"] != 1 || v.Count["tool.requested"] != 0 {
		t.Errorf("ledger %v: want one run.halted, one session.ended and no tool.requested (nothing asked the gate)", v.Types)
	}
	for _, e := range s.Events(t, r) {
		if e.Type != "run.halted" {
			continue
		}
		var d map[string]string
		if err := json.Unmarshal(e.Data, &d); err != nil || d["tool_call_id"] != "toolu_unasked" || d["reason"] != "unasked" {
			t.Errorf("run.halted = %s, want toolu_unasked, unasked", e.Data)
		}
	}
	ses, err := s.Admin.Session(t.Context(), r.ID)
	if err != nil || ses.Status != vocab.Ended {
		t.Errorf("run after the halt: %+v, %v; want ended", ses, err)
	}
	if !res.IsError {
		t.Errorf("claude's result = %q, want an error (the proxy refused the request)", res.Result)
	}
}
