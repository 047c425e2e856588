package roles_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/fluidbox/fluidbox/shared/api"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos/roles"
)

// TestLoad: the template's roles are read, every function of the route
// table has one, and a transactional-only put stays transactional.
func TestLoad(t *testing.T) {
	t.Parallel()
	ps, err := roles.Load("t")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range api.Surface() {
		if _, ok := ps[r.Function.Resource()]; !ok {
			t.Errorf("route %s: no %s in template.yaml", r.Pattern, r.Function.Resource())
		}
	}
	var inTx bool
	for _, st := range ps["GateFunction"].Statements {
		if slices.Contains(st.Actions, "dynamodb:PutItem") {
			inTx = slices.Equal(st.EnclosingOperations, []string{"TransactWriteItems"}) && slices.Equal(st.Resources, []string{ddbchaos.TableARN("t")})
		}
	}
	if !inTx {
		t.Errorf("GateFunction's PutItem = %+v, want only inside TransactWriteItems on the table", ps["GateFunction"])
	}
}

// TestParseRefusesWhatItCannotCheck: a statement the check cannot express
// fails the load instead of being read as something it is not.
func TestParseRefusesWhatItCannotCheck(t *testing.T) {
	t.Parallel()
	fn := func(statement string) []byte {
		return []byte(`Resources:
  XFunction:
    Type: AWS::Serverless::Function
    Properties:
      Policies:
        - Version: '2012-10-17'
          Statement:
            - ` + strings.ReplaceAll(statement, "\n", "\n              ") + "\n")
	}
	for name, st := range map[string]string{
		"a deny":                 "Effect: Deny\nAction: dynamodb:PutItem\nResource: !GetAtt Table.Arn",
		"another condition key":  "Effect: Allow\nAction: dynamodb:PutItem\nResource: !GetAtt Table.Arn\nCondition:\n  ForAllValues:StringEquals:\n    dynamodb:Attributes: [a]",
		"another resource":       "Effect: Allow\nAction: dynamodb:GetItem\nResource: !GetAtt Other.Arn",
		"a NotAction":            "Effect: Allow\nAction: dynamodb:GetItem\nNotAction: dynamodb:PutItem\nResource: !GetAtt Table.Arn",
		"a StringLike on Equals": "Effect: Allow\nAction: dynamodb:PutItem\nResource: !GetAtt Table.Arn\nCondition:\n  ForAnyValue:StringLike:\n    dynamodb:EnclosingOperation: [Transact*]",
	} {
		if _, err := roles.Parse(fn(st), "t"); err == nil {
			t.Errorf("%s was accepted", name)
		}
	}
	ps, err := roles.Parse(fn("Effect: Allow\nAction: [kms:Decrypt]\nResource: '*'"), "t")
	if err != nil || len(ps["XFunction"].Statements) != 0 {
		t.Errorf("a statement of no DynamoDB action = %+v, %v; want it left out", ps, err)
	}
}

// TestServe: each request's context names the function whose route it
// matches (the role Client then signs with).
func TestServe(t *testing.T) {
	t.Parallel()
	var got string
	h := roles.Serve(surface{http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = roles.Named(r.Context())
	})})
	for path, want := range map[string]string{
		"GET /v1/approvals":                              "ApprovalsFunction",
		"POST /v1/sessions/ses_1/permission":             "GateFunction",
		"POST /v1/sessions/ses_1/model/v1/messages":      "BrokerFunction",
		"POST /v1/sessions/ses_1/tools/call":             "BrokerFunction",
		"GET /v1/sessions":                               "ControlFunction",
		"POST /v1/triggers/github":                       "GitHubFunction",
		"DELETE /v1/sessions/ses_1/grants/Bash:git push": "ApprovalsFunction",
		"GET /nowhere":                                   "",
	} {
		method, p, _ := strings.Cut(path, " ")
		got = "unset"
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(context.Background(), method, strings.ReplaceAll(p, " ", "%20"), nil))
		if got != want {
			t.Errorf("%s served as %q, want %q", path, got, want)
		}
	}
}

// surface is a handler that says it serves every route row.
type surface struct{ http.Handler }

func (surface) Routes() []route.Route { return api.Surface() }
