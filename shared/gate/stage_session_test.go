package gate

import (
	"testing"

	"github.com/fluidbox/fluidbox/shared/policy"
)

func TestStageSession(t *testing.T) {
	t.Parallel()
	testStage(t, "session", []stageCase{
		{name: "live run passes", tool: "Read", input: `{"file_path":"a"}`},
		{name: "ended run", run: func(r *Run) { r.Ended = true }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSession, wantReason: "has ended"},
		{name: "ended run, everything else fine", run: func(r *Run) { r.Ended = true; r.Autonomous = true }, tool: "Read", input: `{"file_path":"a"}`,
			wantDone: true, wantOut: policy.VerdictDeny, wantSource: SourceSession},
	})
}

func TestStageSessionNilRun(t *testing.T) {
	t.Parallel()
	d, done := checkSession(&call{})
	if !done || d.Outcome != policy.VerdictDeny || d.Source != SourceSession {
		t.Fatalf("checkSession(nil run) = %+v, %v, want deny/session", d, done)
	}
	if got := Decide(nil, Request{ToolName: "Read"}); got.Outcome != policy.VerdictDeny || got.Source != SourceSession || got.Stage != "session" {
		t.Fatalf("Decide(nil, Read) = %+v, want deny/session", got)
	}
}
