package vocab_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fluidbox/fluidbox/shared/vocab"
)

// TestSpellings pins every value as it is persisted and on the wire
// (docs/openapi.yaml): renaming one breaks stored items and clients.
func TestSpellings(t *testing.T) {
	t.Parallel()
	join := func(vs ...string) string { return strings.Join(vs, " ") }
	var d, s, c, r []string
	for _, v := range vocab.Decisions() {
		d = append(d, string(v))
	}
	for _, v := range vocab.ApprovalStatuses() {
		s = append(s, string(v))
	}
	for _, v := range vocab.Choices() {
		c = append(c, string(v))
	}
	for _, v := range vocab.RunStatuses() {
		r = append(r, string(v))
	}
	for _, tt := range []struct{ got, want string }{
		{join(d...), "allow deny pending"},
		{join(s...), "pending approved_once approved_session denied expired"},
		{join(c...), "approved_once approved_session denied approved"},
		{join(r...), "running awaiting_approval ended"},
	} {
		if tt.got != tt.want {
			t.Errorf("values = %q, want %q", tt.got, tt.want)
		}
	}
}

// record holds one field of each type, as a stored item or a wire body
// would.
type record struct {
	Decision vocab.Decision       `json:"decision" dynamodbav:"decision"`
	Status   vocab.ApprovalStatus `json:"status" dynamodbav:"status"`
	Run      vocab.RunStatus      `json:"run" dynamodbav:"run"`
	Choice   vocab.Choice         `json:"choice"`
}

func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	in := record{vocab.Pending, vocab.ApprovedSession, vocab.AwaitingApproval, vocab.ChoiceApproved}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"decision":"pending","status":"approved_session","run":"awaiting_approval","choice":"approved"}`
	if string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	var out record
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", b, out, err, in)
	}
}

// TestJSONRefusesUnknown: anything but a known spelling fails to decode,
// and fails to encode, so no unknown value passes for one.
func TestJSONRefusesUnknown(t *testing.T) {
	t.Parallel()
	fields := []string{"decision", "status", "run", "choice"}
	for _, v := range []string{`"Allow"`, `"ALLOW"`, `"allow "`, `""`, `"approve"`, `"require_approval"`, `"halted"`, `null`, `1`, `true`, `["allow"]`, `{}`} {
		for _, f := range fields {
			body := `{"` + f + `":` + v + `}`
			var r record
			if err := json.Unmarshal([]byte(body), &r); err == nil {
				t.Errorf("Unmarshal(%s) = %+v, want an error", body, r)
			}
		}
	}
	// Spellings of one type are not another's.
	for body, ok := range map[string]bool{
		`{"decision":"approved_once"}`: false, `{"status":"allow"}`: false, `{"run":"pending"}`: false,
		`{"choice":"expired"}`: false, `{"choice":"pending"}`: false, `{"status":"approved"}`: false,
		`{"decision":"deny"}`: true, `{"status":"denied"}`: true, `{"choice":"denied"}`: true,
	} {
		var r record
		if err := json.Unmarshal([]byte(body), &r); (err == nil) != ok {
			t.Errorf("Unmarshal(%s) = %v, want ok %v", body, err, ok)
		}
	}
	for _, v := range []any{vocab.Decision("maybe"), vocab.ApprovalStatus("halted"), vocab.RunStatus(""), vocab.Choice("approve")} {
		if b, err := json.Marshal(v); err == nil {
			t.Errorf("Marshal(%#v) = %s, want an error", v, b)
		}
	}
}

// TestAttributeValues: what the store decodes is refused the same way,
// whatever the attribute's type.
func TestAttributeValues(t *testing.T) {
	t.Parallel()
	in := record{Decision: vocab.Allow, Status: vocab.ApprovalExpired, Run: vocab.Ended}
	av, err := attributevalue.MarshalMap(in)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := av["status"].(*types.AttributeValueMemberS); !ok || s.Value != "expired" {
		t.Errorf("stored status = %#v, want the string expired", av["status"])
	}
	var out record
	if err := attributevalue.UnmarshalMap(av, &out); err != nil || out != in {
		t.Errorf("UnmarshalMap = %+v, %v; want %+v", out, err, in)
	}
	bad := []types.AttributeValue{
		&types.AttributeValueMemberS{Value: "Allow"},
		&types.AttributeValueMemberS{Value: ""},
		&types.AttributeValueMemberS{Value: "approved"},
		&types.AttributeValueMemberNULL{Value: true},
		&types.AttributeValueMemberN{Value: "1"},
		&types.AttributeValueMemberBOOL{Value: true},
		&types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "allow"}}},
	}
	for _, f := range []string{"decision", "status", "run"} {
		for _, v := range bad {
			var r record
			if err := attributevalue.UnmarshalMap(map[string]types.AttributeValue{f: v}, &r); err == nil {
				t.Errorf("UnmarshalMap(%s: %#v) = %+v, want an error", f, v, r)
			}
		}
	}
	// An absent attribute is the zero value, which nothing compares equal
	// to a state.
	var empty record
	if err := attributevalue.UnmarshalMap(map[string]types.AttributeValue{}, &empty); err != nil || empty.Decision.Valid() {
		t.Errorf("UnmarshalMap({}) = %+v, %v", empty, err)
	}
	if _, err := attributevalue.Marshal(vocab.Decision("maybe")); err == nil {
		t.Error("Marshal(maybe) stored an unknown decision")
	}
}

func TestApprovalStatus(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		s                 vocab.ApprovalStatus
		settled, approved bool
		answer            vocab.Decision
	}{
		{vocab.ApprovalPending, false, false, vocab.Pending},
		{vocab.ApprovedOnce, true, true, vocab.Allow},
		{vocab.ApprovedSession, true, true, vocab.Allow},
		{vocab.ApprovalDenied, true, false, vocab.Deny},
		{vocab.ApprovalExpired, true, false, vocab.Deny},
		{"approved", false, false, vocab.Deny},
	} {
		if tt.s.Settled() != tt.settled || tt.s.Approved() != tt.approved || tt.s.Answer() != tt.answer {
			t.Errorf("%q: settled %v approved %v answer %q; want %v %v %q", tt.s, tt.s.Settled(), tt.s.Approved(), tt.s.Answer(), tt.settled, tt.approved, tt.answer)
		}
	}
	for _, tt := range []struct {
		c    vocab.Choice
		s    vocab.ApprovalStatus
		want bool
	}{
		{vocab.ChoiceApproved, vocab.ApprovedOnce, true},
		{vocab.ChoiceApproved, vocab.ApprovedSession, true},
		{vocab.ChoiceApproved, vocab.ApprovalDenied, false},
		{vocab.ChoiceDenied, vocab.ApprovalDenied, true},
		{vocab.ChoiceDenied, vocab.ApprovalExpired, false},
		{vocab.ChoiceApprovedOnce, vocab.ApprovedSession, false},
		{"pending", vocab.ApprovalPending, false},
	} {
		if got := tt.c.Settles(tt.s); got != tt.want {
			t.Errorf("%q.Settles(%q) = %v, want %v", tt.c, tt.s, got, tt.want)
		}
	}
}
