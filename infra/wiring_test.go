package infra

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEveryFunctionFolderIsDeployed: each functions/<name>/ has a
// <Name>Function in the template, and each function resource has its folder
// (checkCodeUri checks the folder's main.go).
func TestEveryFunctionFolderIsDeployed(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	dirs, err := filepath.Glob(filepath.Join(repoRoot, "functions", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, d := range dirs {
		folders = append(folders, filepath.Base(filepath.Dir(d)))
	}
	var deployed []string
	for id, fn := range resources(l.doc, "AWS::Serverless::Function") {
		uri, _ := props(fn)["CodeUri"].(string)
		name := path.Base(path.Clean(uri))
		deployed = append(deployed, name)
		if want := strings.ToLower(strings.TrimSuffix(id, "Function")); name != want {
			t.Errorf("%s: CodeUri %q, want functions/%s/", id, uri, want)
		}
	}
	for _, f := range folders {
		if !slices.Contains(deployed, f) {
			t.Errorf("functions/%s has no AWS::Serverless::Function in template.yaml", f)
		}
	}
	for _, d := range deployed {
		if !slices.Contains(folders, d) {
			t.Errorf("template function for %q has no functions/%s/main.go", d, d)
		}
	}
}

var substitution = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

// TestStateMachinesReferenceDefinitions: every infra/*.asl.json is the
// DefinitionUri of a state machine, every state machine's definition is
// such a file, and DefinitionSubstitutions fill exactly its placeholders.
// A state machine may only invoke functions of this template (the launch
// state machine's ECS statements are held one by one in launch_test.go).
func TestStateMachinesReferenceDefinitions(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	files, _ := filepath.Glob("*.asl.json")
	if len(files) == 0 {
		t.Fatal("no infra/*.asl.json")
	}
	sms := resources(l.doc, "AWS::Serverless::StateMachine")
	used := map[string]bool{}
	for _, id := range sortedKeys(sms) {
		p := props(sms[id])
		uri, _ := p["DefinitionUri"].(string)
		if p["Definition"] != nil || !strings.HasPrefix(uri, "infra/") || !strings.HasSuffix(uri, ".asl.json") {
			t.Errorf("%s: DefinitionUri = %v, want infra/<name>.asl.json (and no inline Definition)", id, p["DefinitionUri"])
			continue
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(uri)))
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		used[path.Base(uri)] = true
		var want []string
		for _, m := range substitution.FindAllStringSubmatch(string(b), -1) {
			want = append(want, m[1])
		}
		slices.Sort(want)
		want = slices.Compact(want)
		subs, _ := p["DefinitionSubstitutions"].(map[string]any)
		if got := sortedKeys(subs); !slices.Equal(got, want) {
			t.Errorf("%s: DefinitionSubstitutions = %v, want the placeholders of %s: %v", id, got, uri, want)
		}
		if p["Type"] != "STANDARD" {
			t.Errorf("%s: Type = %v, want STANDARD (an express workflow cannot wait longer than 5 minutes)", id, p["Type"])
		}
		sts, errs := functionStatements(id, sms[id])
		for _, err := range errs {
			t.Error(err)
		}
		if len(sts) == 0 {
			t.Errorf("%s: no inline policy statements", id)
		}
		for _, st := range sts {
			checkStatement(t, st, false)
			if id == launchStateMachine {
				continue // runs an ECS task too: TestLaunchStateMachinePrivileges holds each statement
			}
			if a := asStrings(st.fields["Action"]); !slices.Equal(a, []string{"lambda:InvokeFunction"}) {
				t.Errorf("%s: actions %v, want only lambda:InvokeFunction", st.where, a)
			}
			for _, r := range asStrings(st.fields["Resource"]) {
				if !strings.HasPrefix(r, "GETATT:") || !strings.HasSuffix(r, "Function.Arn") {
					t.Errorf("%s: resource %q, want !GetAtt <Name>Function.Arn", st.where, r)
				}
			}
		}
	}
	for _, f := range files {
		if !used[f] {
			t.Errorf("infra/%s is not the DefinitionUri of any state machine", f)
		}
	}
}

// TestApprovalPlumbingPrivileges pins the privileges of the approval
// machinery: only the gate starts expiry timers, only notify publishes,
// and each on its one resource.
func TestApprovalPlumbingPrivileges(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	fns := resources(l.doc, "AWS::Serverless::Function")
	holders := map[string][]string{} // action -> "Function resource"
	for _, id := range sortedKeys(fns) {
		sts, _ := functionStatements(id, fns[id])
		for _, st := range sts {
			for _, a := range asStrings(st.fields["Action"]) {
				for _, r := range asStrings(st.fields["Resource"]) {
					holders[strings.ToLower(a)] = append(holders[strings.ToLower(a)], id+" "+r)
				}
			}
		}
	}
	want := map[string][]string{
		"states:startexecution": {"NotifyFunction REF:ExpiryStateMachine"},
		"events:putevents":      {"NotifyFunction GETATT:EventBus.Arn"},
	}
	for action, w := range want {
		if got := holders[action]; !slices.Equal(got, w) {
			t.Errorf("%s held by %v, want %v", action, got, w)
		}
	}
	if v := dig(props(fns["NotifyFunction"]), "Environment", "Variables", "FLUIDBOX_STATE_MACHINE_ARN"); v != "REF:ExpiryStateMachine" {
		t.Errorf("NotifyFunction FLUIDBOX_STATE_MACHINE_ARN = %v, want !Ref ExpiryStateMachine", v)
	}
	if v := dig(props(fns["NotifyFunction"]), "Environment", "Variables", "FLUIDBOX_EVENT_BUS"); v != "REF:EventBus" {
		t.Errorf("NotifyFunction FLUIDBOX_EVENT_BUS = %v, want !Ref EventBus", v)
	}
	// The stream reaches notify through one mapping that reports partial
	// batch failures and sees only approval rows.
	var found bool
	for id, m := range resources(l.doc, "AWS::Lambda::EventSourceMapping") {
		p := props(m)
		if p["FunctionName"] != "REF:NotifyFunction" {
			continue
		}
		found = true
		if p["EventSourceArn"] != "GETATT:Table.StreamArn" {
			t.Errorf("%s: EventSourceArn = %v, want the table's stream", id, p["EventSourceArn"])
		}
		if !slices.Contains(asStrings(p["FunctionResponseTypes"]), "ReportBatchItemFailures") {
			t.Errorf("%s: FunctionResponseTypes lacks ReportBatchItemFailures", id)
		}
		filters := asList(dig(p, "FilterCriteria", "Filters"))
		// Approval and input request rows, the insert of a run's head
		// (session.created), and the insert of an unsequenced ledger event
		// (numbering).
		if len(filters) != 4 || !strings.Contains(filters[0]["Pattern"].(string), `"prefix":"APR#"`) ||
			!strings.Contains(filters[1]["Pattern"].(string), `"prefix":"INP#"`) ||
			!strings.Contains(filters[2]["Pattern"].(string), `"eventName":["INSERT"]`) || !strings.Contains(filters[2]["Pattern"].(string), `"S":["HEAD"]`) ||
			!strings.Contains(filters[3]["Pattern"].(string), `"eventName":["INSERT"]`) || !strings.Contains(filters[3]["Pattern"].(string), `"prefix":"Q#"`) {
			t.Errorf("%s: FilterCriteria = %v, want the APR# and INP# filters, the run-head insert filter and the unsequenced-event insert filter", id, p["FilterCriteria"])
		}
	}
	if !found {
		t.Error("no AWS::Lambda::EventSourceMapping feeds NotifyFunction")
	}
}

// TestSlackPrivileges: the Slack function reads the table and writes only
// its own message records; the approvals function's only write outside a
// transaction is the replay claim of a Slack request; the signing secret
// reaches the approvals function alone; the Slack function hears only
// fluidbox's approval notifications.
func TestSlackPrivileges(t *testing.T) {
	t.Parallel()
	l := mustLoad(t)
	fns := resources(l.doc, "AWS::Serverless::Function")
	leading := func(st statement) []string {
		return asStrings(dig(st.fields, "Condition", "ForAllValues:StringLike", "dynamodb:LeadingKeys"))
	}
	sts, errs := functionStatements("SlackFunction", fns["SlackFunction"])
	for _, err := range errs {
		t.Error(err)
	}
	for _, st := range sts {
		for _, a := range asStrings(st.fields["Action"]) {
			switch strings.ToLower(a) {
			case "dynamodb:getitem":
			case "dynamodb:putitem", "dynamodb:deleteitem":
				if got := leading(st); !slices.Equal(got, []string{"SLACKMSG#*"}) {
					t.Errorf("SlackFunction %s limited to leading keys %v, want [SLACKMSG#*]", a, got)
				}
			case "sqs:sendmessage", "sqs:receivemessage", "sqs:deletemessage", "sqs:getqueueattributes":
				// Its retry queue alone (infra/delivery_test.go checks the rest).
				if got := asStrings(st.fields["Resource"]); !slices.Equal(got, []string{"GETATT:SlackRetryQueue.Arn"}) {
					t.Errorf("SlackFunction %s on %v, want its retry queue only", a, got)
				}
			default:
				t.Errorf("SlackFunction holds %s; it reads the table and writes its message records only", a)
			}
		}
	}
	sts, _ = functionStatements("ApprovalsFunction", fns["ApprovalsFunction"])
	for _, st := range sts {
		if !slices.Contains(asStrings(st.fields["Action"]), "dynamodb:PutItem") {
			continue
		}
		inTx := slices.Contains(asStrings(dig(st.fields, "Condition", "ForAnyValue:StringEquals", "dynamodb:EnclosingOperation")), "TransactWriteItems")
		if !inTx && !slices.Equal(leading(st), []string{"SLACKREQ#*"}) {
			t.Errorf("ApprovalsFunction %s: PutItem outside a transaction beyond SLACKREQ#* (%v)", st.where, st.fields["Condition"])
		}
	}
	for _, id := range sortedKeys(fns) {
		v := dig(props(fns[id]), "Environment", "Variables", "FLUIDBOX_SLACK_SIGNING_SECRET")
		if (v != nil) != (id == "ApprovalsFunction") {
			t.Errorf("%s FLUIDBOX_SLACK_SIGNING_SECRET = %v; only ApprovalsFunction verifies interactions", id, v)
		}
	}
	ev, _ := dig(props(fns["SlackFunction"]), "Events", "ApprovalNotifications").(map[string]any)
	p, _ := ev["Properties"].(map[string]any)
	if ev["Type"] != "EventBridgeRule" || p["EventBusName"] != "REF:EventBus" ||
		!slices.Equal(asStrings(dig(p, "Pattern", "source")), []string{"fluidbox"}) ||
		!slices.Equal(asStrings(dig(p, "Pattern", "detail-type")), []string{"approval.requested", "approval.decided", "input.requested", "input.settled", "run.halted"}) {
		t.Errorf("SlackFunction's event = %v, want the fluidbox bus's approval, input request and halt notifications", ev)
	}
}
