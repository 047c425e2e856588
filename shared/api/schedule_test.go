package api_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
	"github.com/fluidbox/fluidbox/shared/internal/githubtest"
	"github.com/fluidbox/fluidbox/shared/internal/testenv"
	"github.com/fluidbox/fluidbox/shared/ledger"
	"github.com/fluidbox/fluidbox/shared/schedule/firing"
	"github.com/fluidbox/fluidbox/shared/seal"
	"github.com/fluidbox/fluidbox/shared/store"
)

// scheduleRepo is the repository the schedule tests' triggers are for.
const scheduleRepo = "acme/nightly"

// clock is a test clock: the API's Now, and the time each tick is given.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// scheduleStack is the API on a test clock, with the GitHub App set and
// installed on scheduleRepo, whose main branch holds a commit.
type scheduleStack struct {
	*stack
	gh     *githubtest.Server
	clock  *clock
	sealer seal.Sealer
	// created counts the runs the schedules announced (RunCreated).
	created atomic.Int64
}

// monday0800 is a Monday, 08:00 UTC.
var monday0800 = time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)

func newScheduleStack(t *testing.T) *scheduleStack {
	t.Helper()
	st, db := roleStore(t)
	c := &clock{t: monday0800}
	led := ledger.New(st, c.Now)
	sealer := localSealer(t)
	srv := httptest.NewServer(roles.Serve(api.New(api.Config{AdminToken: adminToken, Ledger: led, Now: c.Now,
		GitHubWebhookSecret: webhookSecret, Sealer: sealer, Egress: testenv.Loopback})))
	t.Cleanup(srv.Close)
	s := &scheduleStack{stack: &stack{t: t, url: srv.URL, st: st, db: db, led: led}, gh: githubtest.New(t), clock: c, sealer: sealer}
	s.must(200, "PUT", "/v1/github-app", adminToken, map[string]any{
		"app_id": githubtest.AppID, "private_key": string(s.gh.PrivateKey), "api_url": s.gh.API, "git_url": s.gh.Git})
	s.gh.Install(scheduleRepo, 7)
	s.gh.Commit(scheduleRepo, "refs/heads/main", map[string]githubtest.File{"README.md": {Content: "first\n"}})
	return s
}

// schedules is one process's firing of schedules (the dev ticker's or the
// schedule function's), over the same table.
func (s *scheduleStack) schedules() *firing.Schedules {
	return firing.New(firing.Config{
		Config: route.Config{Ledger: s.led, Logger: slog.New(slog.DiscardHandler), Now: s.clock.Now},
		Sealer: s.sealer, Egress: testenv.Loopback,
		RunCreated: func(context.Context, store.Head) { s.created.Add(1) },
	})
}

// trigger creates a scheduled trigger with extra fields.
func (s *scheduleStack) trigger(expr string, extra map[string]any) map[string]any {
	s.t.Helper()
	body := map[string]any{"repository": scheduleRepo, "policy_id": s.policy(basicPolicy), "capabilities": []string{"claude-code"},
		"budget": map[string]any{"limit_usd": 1}, "schedule": expr, "prompt": "review the main branch"}
	for k, v := range extra {
		body[k] = v
	}
	return s.must(201, "POST", "/v1/triggers", adminToken, body)
}

// tick ticks f at at, in the schedule function's IAM role.
func (s *scheduleStack) tick(f *firing.Schedules, at time.Time) firing.Ticked {
	s.t.Helper()
	s.clock.Set(at)
	got, err := f.Tick(roles.As(context.Background(), "ScheduleFunction"), at)
	if err != nil {
		s.t.Fatalf("Tick(%v) = %v", at, err)
	}
	return got
}

func (s *scheduleStack) scheduledRuns() []map[string]any {
	s.t.Helper()
	var out []map[string]any
	for _, r := range s.must(200, "GET", "/v1/sessions?limit=100", adminToken, nil)["sessions"].([]any) {
		run := r.(map[string]any)
		if run["trigger"] == "schedule" {
			out = append(out, s.must(200, "GET", "/v1/sessions/"+run["id"].(string), adminToken, nil))
		}
	}
	return out
}

// TestScheduleFiresTwice: a schedule fires twice on a test clock and makes
// two runs, each on its branch's head at its fire, launched like a pull
// request's run (announced, its workspace the frozen commit).
func TestScheduleFiresTwice(t *testing.T) {
	t.Parallel()
	s := newScheduleStack(t)
	trg := s.trigger("cron(0 9 ? * MON-FRI *)", nil)
	if trg["schedule"] != "cron(0 9 ? * MON-FRI *)" || trg["ref"] != nil {
		t.Fatalf("trigger = %v, want the schedule and no ref", trg)
	}
	if ev, _ := trg["events"].([]any); len(ev) != 0 {
		t.Errorf("scheduled trigger's events = %v, want none (pull requests only when asked)", ev)
	}
	f := s.schedules()
	for _, at := range []time.Time{monday0800, monday0800.Add(59 * time.Minute)} {
		if got := s.tick(f, at); len(got.Created) != 0 || got.Scheduled != 1 {
			t.Fatalf("Tick(%v) = %+v, want 1 scheduled, none created", at, got)
		}
	}
	first := s.tick(f, monday0800.Add(time.Hour))
	s.tick(f, monday0800.Add(time.Hour+30*time.Second))
	second := s.gh.Commit(scheduleRepo, "refs/heads/main", map[string]githubtest.File{"README.md": {Content: "second\n"}})
	tuesday := s.tick(f, monday0800.Add(25*time.Hour+10*time.Second))
	if len(first.Created) != 1 || len(tuesday.Created) != 1 {
		t.Fatalf("ticks created %v and %v, want one run each", first.Created, tuesday.Created)
	}
	runs := s.scheduledRuns()
	if len(runs) != 2 || s.created.Load() != 2 {
		t.Fatalf("%d scheduled runs, %d announced, want 2 and 2", len(runs), s.created.Load())
	}
	checkScheduledRuns(t, runs, first.Created[0], tuesday.Created[0], second)
	checkScheduledLaunch(t, s, tuesday.Created[0], second)
}

// checkScheduledRuns: each run is a trusted schedule run on main, for its
// fire's time; Tuesday's froze the head at its fire, second.
func checkScheduledRuns(t *testing.T, runs []map[string]any, first, tuesday, second string) {
	t.Helper()
	for _, r := range runs {
		gh := r["github"].(map[string]any)
		want := map[string]string{tuesday: "2026-12-08T09:00:00.000000000Z", first: "2026-12-07T09:00:00.000000000Z"}[r["id"].(string)]
		if r["trigger"] != "schedule" || gh["event"] != "schedule" || gh["ref"] != "main" || gh["scheduled_for"] != want || r["trust_tier"] != "trusted" {
			t.Errorf("run %v = trigger %v github %v tier %v, want schedule on main for %s, trusted", r["id"], r["trigger"], gh, r["trust_tier"], want)
		}
		if r["id"] == tuesday && gh["head_sha"] != second {
			t.Errorf("Tuesday's run froze %v, want the head at its fire %s", gh["head_sha"], second)
		}
	}
}

// checkScheduledLaunch: the run id is launched like a pull request's run:
// its workspace is the commit it froze, its ledger starts with
// session.created, and its result is reported as a check run on that
// commit.
func checkScheduledLaunch(t *testing.T, s *scheduleStack, id, commit string) {
	t.Helper()
	tok := s.must(200, "POST", "/v1/sessions/"+id+"/token", adminToken, nil)["token"].(string)
	req, _ := http.NewRequest("GET", s.url+"/v1/sessions/"+id+"/workspace", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Fluidbox-Commit") != commit {
		t.Errorf("workspace = %d commit %q, want 200 %s", resp.StatusCode, resp.Header.Get("X-Fluidbox-Commit"), commit)
	}
	types, _ := eventTypes(s.stack, id)
	if len(types) == 0 || types[0] != "session.created" {
		t.Errorf("scheduled run's ledger = %v, want session.created first", types)
	}
	s.must(200, "POST", "/v1/sessions/"+id+"/end", adminToken, map[string]any{"reason": "exited", "exit_status": 0, "final_message": "nightly: fine"})
	if got := s.must(200, "POST", "/v1/sessions/"+id+"/report", adminToken, nil); got["kind"] != "check_run" {
		t.Errorf("scheduled run's report = %v, want a check run", got)
	}
	if posts := s.gh.Posts(); len(posts) != 1 || posts[0].Kind != "check_run" || posts[0].Repository != scheduleRepo || posts[0].Body["head_sha"] != commit {
		t.Errorf("posted = %+v, want one check run on %s at %s", posts, scheduleRepo, commit)
	}
}

func eventTypes(s *stack, id string) ([]string, map[string]map[string]any) {
	var types []string
	data := map[string]map[string]any{}
	for _, e := range s.must(200, "GET", "/v1/sessions/"+id+"/events", adminToken, nil)["events"].([]any) {
		ev := e.(map[string]any)
		types = append(types, ev["type"].(string))
		data[ev["type"].(string)], _ = ev["data"].(map[string]any)
	}
	return types, data
}

// TestScheduleFiresOnceAcrossProcesses: two processes (two dev servers on
// one table, or an invocation and its retry), a dozen ticks each at once,
// at the same due time: one run, announced once.
func TestScheduleFiresOnceAcrossProcesses(t *testing.T) {
	t.Parallel()
	s := newScheduleStack(t)
	s.trigger("rate(1 hour)", nil)
	procs := []*firing.Schedules{s.schedules(), s.schedules()}
	at := monday0800.Add(time.Hour + 5*time.Second)
	s.clock.Set(at)
	var wg sync.WaitGroup
	var created atomic.Int64
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := procs[i%2].Tick(roles.As(context.Background(), "ScheduleFunction"), at)
			if err != nil {
				t.Errorf("Tick = %v", err)
			}
			created.Add(int64(len(got.Created)))
		}()
	}
	wg.Wait()
	if runs := s.scheduledRuns(); len(runs) != 1 || created.Load() != 1 || s.created.Load() != 1 {
		t.Fatalf("%d runs, %d created, %d announced; want one of each", len(runs), created.Load(), s.created.Load())
	}
}

// TestScheduleRetriedFire: a fire whose process stopped between its claim
// and its run is finished by the next tick, once; a claim older than the
// retry window is left alone.
func TestScheduleRetriedFire(t *testing.T) {
	t.Parallel()
	s := newScheduleStack(t)
	s.trigger("rate(1 hour)", nil)
	trg, err := s.st.ScheduledTriggers(context.Background())
	if err != nil || len(trg) != 1 {
		t.Fatalf("ScheduledTriggers = %v %v", trg, err)
	}
	due := monday0800.Add(time.Hour)
	claim := func(at time.Time) {
		err := s.st.ClaimFire(context.Background(), store.Fire{TriggerID: trg[0].ID, Due: store.FormatTime(due),
			RunID: firing.RunID(trg[0].ID, due), ClaimedAt: store.FormatTime(at), Expires: due.Add(48 * time.Hour).Unix()}, trg[0])
		if err != nil {
			t.Fatalf("ClaimFire = %v", err)
		}
	}
	claim(due) // the process that claimed it stopped here
	f := s.schedules()
	if got := s.tick(f, due.Add(time.Minute)); len(got.Created) != 1 || got.Created[0] != firing.RunID(trg[0].ID, due) {
		t.Fatalf("tick after a stopped fire created %v, want its run %s", got.Created, firing.RunID(trg[0].ID, due))
	}
	if got := s.tick(f, due.Add(2*time.Minute)); len(got.Created) != 0 {
		t.Fatalf("second tick created %v, want none", got.Created)
	}
	if err := s.st.ClaimFire(context.Background(), store.Fire{TriggerID: trg[0].ID, Due: store.FormatTime(due)}, trg[0]); !errors.Is(err, store.ErrFireClaimed) {
		t.Errorf("ClaimFire of a claimed due time = %v, want ErrFireClaimed", err)
	}

	// A claim given up on: its run is never made.
	s2 := newScheduleStack(t)
	s2.trigger("rate(1 hour)", nil)
	trg2, _ := s2.st.ScheduledTriggers(context.Background())
	err = s2.st.ClaimFire(context.Background(), store.Fire{TriggerID: trg2[0].ID, Due: store.FormatTime(due),
		RunID: firing.RunID(trg2[0].ID, due), ClaimedAt: store.FormatTime(due), Expires: due.Add(48 * time.Hour).Unix()}, trg2[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.tick(s2.schedules(), due.Add(11*time.Minute)); len(got.Created) != 0 {
		t.Errorf("tick 11 minutes after an unfinished claim created %v, want none (given up after 10)", got.Created)
	}
}

// TestScheduleMissedFireOnce: after downtime, of the due times missed only
// the latest fires, once; one missed by more than a day does not.
func TestScheduleMissedFireOnce(t *testing.T) {
	t.Parallel()
	s := newScheduleStack(t)
	s.trigger("rate(1 hour)", nil)
	f := s.schedules()
	got := s.tick(f, monday0800.Add(5*time.Hour+30*time.Minute)) // down since 08:00: five missed
	if len(got.Created) != 1 {
		t.Fatalf("tick after five missed hours created %v, want one run", got.Created)
	}
	s.tick(f, monday0800.Add(5*time.Hour+45*time.Minute))
	runs := s.scheduledRuns()
	if len(runs) != 1 || runs[0]["github"].(map[string]any)["scheduled_for"] != "2026-12-07T13:00:00.000000000Z" {
		t.Fatalf("runs after downtime = %d (%v), want one for 13:00", len(runs), runs)
	}

	// A weekday schedule down from Friday 10:00 to Monday 08:00: Friday's
	// 09:00 fired, the weekend has none, and nothing is due until 09:00.
	s2 := newScheduleStack(t)
	friday := monday0800.AddDate(0, 0, -3)
	s2.clock.Set(friday)
	s2.trigger("cron(0 9 ? * MON-FRI *)", nil)
	f2 := s2.schedules()
	if got := s2.tick(f2, friday.Add(2*time.Hour)); len(got.Created) != 1 {
		t.Fatalf("Friday 10:00 created %v, want Friday's run", got.Created)
	}
	if got := s2.tick(f2, monday0800); len(got.Created) != 0 {
		t.Fatalf("Monday 08:00 created %v, want none", got.Created)
	}
	// A weekly schedule missed by more than the look-back (a day):
	// Monday's 09:00, seen on Tuesday at 09:01, does not fire.
	s3 := newScheduleStack(t)
	s3.trigger("cron(0 9 ? * MON *)", nil)
	if got := s3.tick(s3.schedules(), monday0800.Add(25*time.Hour+time.Minute)); len(got.Created) != 0 {
		t.Fatalf("a fire missed by more than %v created %v, want none", firing.Lookback, got.Created)
	}
}

// TestScheduleInvalid: what a scheduled trigger refuses, with a 400 that
// says why.
func TestScheduleInvalid(t *testing.T) {
	t.Parallel()
	s := newScheduleStack(t)
	pol := s.policy(basicPolicy)
	for _, c := range []struct {
		extra map[string]any
		want  string
	}{
		{map[string]any{"schedule": "cron(0 9 * * * *)"}, "one of day-of-month and day-of-week must be \"?\""},
		{map[string]any{"schedule": "cron(0 9 ? * MON-FRI)"}, "six fields"},
		{map[string]any{"schedule": "rate(1 minutes)"}, "singular unit"},
		{map[string]any{"schedule": "rate(0 minutes)"}, "positive whole number"},
		{map[string]any{"schedule": "0 9 * * 1-5"}, "cron("},
		{map[string]any{"schedule": "cron(0 0 1 JAN ? 2020)"}, "never due again"},
		{map[string]any{"schedule": "cron(0 0 30 FEB ? *)"}, "never due"},
		{map[string]any{"schedule": "rate(1 day)", "ref": "refs/heads/main"}, "ref: must be a branch name"},
		{map[string]any{"schedule": "rate(1 day)", "ref": "a..b"}, "ref: must be a branch name"},
		{map[string]any{"ref": "main"}, "only a trigger with a schedule takes a ref"},
		{map[string]any{"schedule": "rate(1 day)", "report": "comment", "prompt": "p"}, "no pull request to comment on"},
		{map[string]any{"schedule": "rate(1 day)"}, "a trigger with a schedule needs a prompt"},
	} {
		body := map[string]any{"repository": scheduleRepo, "policy_id": pol, "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}}
		for k, v := range c.extra {
			body[k] = v
		}
		r := s.do("POST", "/v1/triggers", adminToken, body)
		msg, _ := r.body["error"].(map[string]any)["message"].(string)
		if r.status != 400 || r.body["error"].(map[string]any)["code"] != "invalid_request" || !strings.Contains(msg, c.want) {
			t.Errorf("POST /v1/triggers %v = %d %s, want 400 invalid_request saying %q", c.extra, r.status, r.raw, c.want)
		}
	}
	if ts, err := s.st.ScheduledTriggers(context.Background()); err != nil || len(ts) != 0 {
		t.Errorf("scheduled triggers after refusals = %v %v, want none", ts, err)
	}
}

// TestScheduleStops: a trigger whose schedule is removed or changed, or
// which is deleted, stops firing what it no longer says; a claim made from
// a stale read of it is refused.
func TestScheduleStops(t *testing.T) {
	t.Parallel()
	s := newScheduleStack(t)
	trg := s.trigger("rate(1 hour)", map[string]any{"ref": "main"})
	id := trg["id"].(string)
	f := s.schedules()
	if got := s.tick(f, monday0800.Add(time.Hour)); len(got.Created) != 1 {
		t.Fatalf("first tick created %v, want one run", got.Created)
	}
	stale, err := s.st.GetTrigger(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"repository": scheduleRepo, "policy_id": trg["policy_id"], "capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}, "prompt": "p"}
	s.clock.Set(monday0800.Add(90 * time.Minute))
	s.must(200, "PUT", "/v1/triggers/"+id, adminToken, body) // the schedule removed
	if got := s.tick(f, monday0800.Add(2*time.Hour)); len(got.Created) != 0 || got.Scheduled != 0 {
		t.Fatalf("tick after the schedule was removed = %+v, want nothing", got)
	}
	due := monday0800.Add(2 * time.Hour)
	if err := s.st.ClaimFire(context.Background(), store.Fire{TriggerID: id, Due: store.FormatTime(due), RunID: firing.RunID(id, due)}, stale); !errors.Is(err, store.ErrTriggerChanged) {
		t.Errorf("ClaimFire from a read before the schedule was removed = %v, want ErrTriggerChanged", err)
	}

	// Set again: it counts from now (10:00), so 11:00 is its first.
	s.clock.Set(monday0800.Add(2 * time.Hour))
	body["schedule"] = "rate(1 hour)"
	s.must(200, "PUT", "/v1/triggers/"+id, adminToken, body)
	if got := s.tick(f, monday0800.Add(2*time.Hour+30*time.Minute)); len(got.Created) != 0 {
		t.Fatalf("tick before the new schedule's first due time created %v", got.Created)
	}
	if got := s.tick(f, monday0800.Add(3*time.Hour)); len(got.Created) != 1 {
		t.Fatalf("tick at the new schedule's first due time created %v, want one", got.Created)
	}
	s.must(200, "DELETE", "/v1/triggers/"+id, adminToken, nil)
	if got := s.tick(f, monday0800.Add(4*time.Hour)); len(got.Created) != 0 || got.Scheduled != 0 {
		t.Fatalf("tick after the trigger was deleted = %+v, want nothing", got)
	}
	if runs := s.scheduledRuns(); len(runs) != 2 {
		t.Errorf("%d scheduled runs, want 2", len(runs))
	}
}

// TestScheduledTriggerPullRequests: a scheduled trigger starts no pull
// request's run unless its events say so.
func TestScheduledTriggerPullRequests(t *testing.T) {
	t.Parallel()
	s := newScheduleStack(t)
	trg := s.must(201, "POST", "/v1/triggers", adminToken, map[string]any{"repository": "Codertocat/Hello-World", "policy_id": s.policy(basicPolicy),
		"capabilities": []string{"claude-code"}, "budget": map[string]any{"limit_usd": 1}, "schedule": "rate(1 day)", "prompt": "p"})
	if r := s.deliver(signed("d-sched-1", payload(t, "same_repo.opened.json"))); r.status != http.StatusAccepted {
		t.Errorf("delivery to a schedule-only trigger = %d %s, want 202 ignored", r.status, r.raw)
	}
	body := map[string]any{"repository": "Codertocat/Hello-World", "policy_id": trg["policy_id"], "capabilities": []string{"claude-code"},
		"budget": map[string]any{"limit_usd": 1}, "schedule": "rate(1 day)", "prompt": "p", "events": []string{"pull_request"}}
	s.must(200, "PUT", "/v1/triggers/"+trg["id"].(string), adminToken, body)
	if r := s.deliver(signed("d-sched-2", payload(t, "same_repo.opened.json"))); r.status != http.StatusCreated {
		t.Errorf("delivery once the trigger handles pull requests = %d %s, want 201", r.status, r.raw)
	}
}
