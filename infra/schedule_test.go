package infra

import (
	"slices"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/githubapp"
)

// The function that fires scheduled triggers (docs/architecture.md,
// "Schedules").
const scheduleFunction = "ScheduleFunction"

// gitHubAppContext is the KMS condition that limits a Decrypt to what was
// sealed for the GitHub App (seal.Context{ConnectionID: githubapp.SealID}).
const gitHubAppContext = "kms:EncryptionContext:fluidbox:connection"

// gitHubAppOpeners are the functions that may open the GitHub App's key
// and no other sealed value: the schedule function reads a branch's head,
// the launch function reports a run whose runner died.
var gitHubAppOpeners = []string{scheduleFunction, launchFunction}

// opensGitHubAppOnly says whether st, a statement of function id, may
// decrypt only what was sealed for the GitHub App: the one exception to
// "Decrypt only in the broker", for gitHubAppOpeners.
func opensGitHubAppOnly(id string, st statement) bool {
	if !slices.Contains(gitHubAppOpeners, id) {
		return false
	}
	cond, _ := st.fields["Condition"].(map[string]any)
	eq, _ := cond["StringEquals"].(map[string]any)
	return slices.Equal(asStrings(eq[gitHubAppContext]), []string{githubapp.SealID})
}

// TestScheduleLeastPrivilege holds the schedule function to exactly what a
// fire needs: read the scheduled triggers and what a run freezes, claim a
// due time and write a run (conditional puts, a condition check), undo a
// failed creation, and open the GitHub App's key, in its role and in the
// key's policy. It runs on one rule, every minute, and serves no route.
func TestScheduleLeastPrivilege(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	fn, ok := resources(l.doc, "AWS::Serverless::Function")[scheduleFunction]
	if !ok {
		t.Fatalf("template.yaml has no %s", scheduleFunction)
	}
	sts, errs := functionStatements(scheduleFunction, fn)
	for _, err := range errs {
		t.Error(err)
	}
	var actions []string
	decrypts := 0
	for _, st := range sts {
		for _, a := range asStrings(st.fields["Action"]) {
			actions = append(actions, strings.ToLower(a))
			if strings.EqualFold(a, "kms:Decrypt") {
				decrypts++
				if !opensGitHubAppOnly(scheduleFunction, st) {
					t.Errorf("%s: kms:Decrypt without %s = %q", st.where, gitHubAppContext, githubapp.SealID)
				}
			}
		}
	}
	slices.Sort(actions)
	want := []string{"dynamodb:conditioncheckitem", "dynamodb:deleteitem", "dynamodb:getitem", "dynamodb:putitem", "dynamodb:query", "kms:decrypt"}
	if !slices.Equal(actions, want) {
		t.Errorf("%s actions = %v, want %v", scheduleFunction, actions, want)
	}
	if decrypts != 1 {
		t.Errorf("%s: %d statements decrypt, want 1", scheduleFunction, decrypts)
	}

	events, _ := props(fn)["Events"].(map[string]any)
	if len(events) != 1 {
		t.Fatalf("%s events = %v, want one schedule", scheduleFunction, sortedKeys(events))
	}
	for name, e := range events {
		ev, _ := e.(map[string]any)
		p, _ := ev["Properties"].(map[string]any)
		if ev["Type"] != "Schedule" || p["Schedule"] != "rate(1 minute)" {
			t.Errorf("%s event %s = %v, want a Schedule of rate(1 minute)", scheduleFunction, name, ev)
		}
	}

	checkKeyOpensGitHubAppOnly(t, l, scheduleFunction)
}

// checkKeyOpensGitHubAppOnly: the key's policy grants function id's role
// kms:Decrypt under the same condition as its own policy, so the key
// itself refuses it any other sealed value.
func checkKeyOpensGitHubAppOnly(t *testing.T, l *loaded, id string) {
	t.Helper()
	key := resources(l.doc, "AWS::KMS::Key")["CredentialKey"]
	policy, err := statementsOf("CredentialKey.KeyPolicy", props(key)["KeyPolicy"])
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, st := range policy {
		principal, _ := st.fields["Principal"].(map[string]any)
		if !strings.Contains(strings.Join(asStrings(principal["AWS"]), ","), id+"Role") {
			continue
		}
		found = true
		if !slices.Equal(asStrings(st.fields["Action"]), []string{"kms:Decrypt"}) || !opensGitHubAppOnly(id, st) {
			t.Errorf("%s: %s's role may %v, want kms:Decrypt under %s = %q only", st.where, id, st.fields["Action"], gitHubAppContext, githubapp.SealID)
		}
	}
	if !found {
		t.Errorf("CredentialKey's policy grants %s's role nothing; it cannot open the GitHub App's key", id)
	}
}
