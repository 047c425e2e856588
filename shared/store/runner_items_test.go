package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fluidbox/fluidbox/shared/store"
)

func TestGitHubApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	_, err := st.GetGitHubApp(ctx)
	wantErr(t, "no app yet", err, store.ErrNotFound)
	a := store.GitHubApp{AppID: 7, APIURL: "https://api.github.com", GitURL: "https://github.com", Sealed: []byte{1}, Generation: 1, UpdatedAt: at(0), UpdatedBy: "admin"}
	must(t, st.PutGitHubApp(ctx, a, 0))
	wantErr(t, "a first app again", st.PutGitHubApp(ctx, a, 0), store.ErrGitHubAppChanged)
	a.Generation = 2
	wantErr(t, "a replacement on a stale generation", st.PutGitHubApp(ctx, a, 5), store.ErrGitHubAppChanged)
	must(t, st.PutGitHubApp(ctx, a, 1))
	if got, err := st.GetGitHubApp(ctx); err != nil || got.Generation != 2 || got.AppID != 7 {
		t.Errorf("app = %+v, %v", got, err)
	}
}

// TestLaunch: a run is launched once; its credential is used once, by
// many racing issues exactly one; its first reuse is recorded once.
func TestLaunch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_0", 0)
	_, err := st.GetLaunch(ctx, "ses_0")
	wantErr(t, "no launch yet", err, store.ErrNotFound)
	wantErr(t, "using a launch that does not exist", func() error {
		_, err := append1(t, st, h, store.HeadChange{}, st.UseLaunch("ses_0", at(0)))
		return err
	}(), store.ErrLaunchUsed)
	put := func() store.Op {
		op, err := st.PutLaunch("ses_0", store.Launch{CredentialHash: "h", Launcher: "local", LaunchedAt: at(0)})
		must(t, err)
		return op
	}
	h, err = append1(t, st, h, store.HeadChange{}, put())
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, put())
	wantErr(t, "a second launch", err, store.ErrLaunched)
	wantErr(t, "recording a reuse before any use", func() error {
		_, err := append1(t, st, h, store.HeadChange{}, st.MarkLaunchReused("ses_0", at(0)))
		return err
	}(), store.ErrLaunchReuseRecorded)
	won := wins(t, 16, store.ErrLaunchUsed, func(int) error {
		for {
			cur, err := st.GetHead(ctx, "ses_0")
			if err != nil {
				return err
			}
			_, err = append1(t, st, cur, store.HeadChange{}, st.UseLaunch("ses_0", at(1)))
			// Another use moved the counter: read the head again.
			var conflict *store.SeqConflictError
			if errors.As(err, &conflict) {
				continue
			}
			return err
		}
	})
	if won != 1 {
		t.Fatalf("%d uses of one launch credential won, want 1", won)
	}
	h, err = st.GetHead(ctx, "ses_0")
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{}, st.MarkLaunchReused("ses_0", at(2)))
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, st.MarkLaunchReused("ses_0", at(3)))
	wantErr(t, "a second reuse record", err, store.ErrLaunchReuseRecorded)
	if l, err := st.GetLaunch(ctx, "ses_0"); err != nil || l.UsedAt != at(1) || l.ReusedAt != at(2) || l.Launcher != "local" {
		t.Errorf("launch = %+v, %v", l, err)
	}
}

// TestResultAndReport: a run's result and its report are written once.
func TestResultAndReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStore(t)
	h := newRun(t, st, "ses_0", 0)
	_, err := st.GetResult(ctx, "ses_0")
	wantErr(t, "no result yet", err, store.ErrNotFound)
	_, err = st.GetReport(ctx, "ses_0")
	wantErr(t, "no report yet", err, store.ErrNotFound)
	res, err := st.PutResult("ses_0", store.Result{Reason: "exited", ExitStatus: 0, FinalMessage: "ok", EndedAt: at(0)})
	must(t, err)
	rep, err := st.PutReport("ses_0", store.Report{Kind: "check_run", ID: 9, ReportedAt: at(0)})
	must(t, err)
	h, err = append1(t, st, h, store.HeadChange{}, res, rep)
	must(t, err)
	_, err = append1(t, st, h, store.HeadChange{}, res)
	wantErr(t, "a second result", err, store.ErrExists)
	_, err = append1(t, st, h, store.HeadChange{}, rep)
	wantErr(t, "a second report", err, store.ErrExists)
	if got, err := st.GetResult(ctx, "ses_0"); err != nil || got.FinalMessage != "ok" {
		t.Errorf("result = %+v, %v", got, err)
	}
	if got, err := st.GetReport(ctx, "ses_0"); err != nil || got.ID != 9 {
		t.Errorf("report = %+v, %v", got, err)
	}
}
