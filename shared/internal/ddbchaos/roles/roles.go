// Package roles gives the DynamoDB requests a test makes on behalf of a
// Lambda function the IAM role template.yaml gives that function, so that
// a table operation outside the function's statements fails the test as it
// fails on AWS: AccessDeniedException, which the store answers as
// ErrUnavailable (a 503, or a deny).
//
// Roles are told apart as AWS tells them apart, by the access key a
// request is signed with: Client signs each request with the logical id of
// the function its context names (As), and with an unchecked key when it
// names none (a test's own setup and reads). Serve names, on each HTTP
// request's context, the function of the route row the request matches,
// so the whole API served on one listener (shared/api) makes each
// route's table requests as the function AWS runs that route in.
//
// What it cannot see: a request made on a context that lost the function
// (context.Background() under a handler) is signed as the test and not
// checked.
package roles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/awslabs/goformation/v7/intrinsics"

	"github.com/fluidbox/fluidbox/infra"
	"github.com/fluidbox/fluidbox/shared/api/route"
	"github.com/fluidbox/fluidbox/shared/devstack"
	"github.com/fluidbox/fluidbox/shared/internal/ddbchaos"
)

// Unchecked is the access key of requests made for no function.
const Unchecked = "local"

type roleKey struct{}

// As returns ctx naming the function (its logical id in template.yaml,
// "ApprovalsFunction") whose role its DynamoDB requests are made in.
func As(ctx context.Context, function string) context.Context {
	return context.WithValue(ctx, roleKey{}, function)
}

// Named is the function ctx names ("" for none).
func Named(ctx context.Context) string {
	f, _ := ctx.Value(roleKey{}).(string)
	return f
}

// Client is the DynamoDB client option that signs each request as the
// function its context names (As), or as Unchecked.
func Client(o *dynamodb.Options) {
	o.Credentials = aws.CredentialsProviderFunc(func(ctx context.Context) (aws.Credentials, error) {
		key := Named(ctx)
		if key == "" {
			key = Unchecked
		}
		return aws.Credentials{AccessKeyID: key, SecretAccessKey: "local", Source: "roles"}, nil
	})
}

// Serve is h with each request's context naming the function whose route
// row the request matches. h is the whole API (shared/api.New), which
// says which rows it serves; a request no row matches names none.
func Serve(h http.Handler) http.Handler {
	s, ok := h.(interface{ Routes() []route.Route })
	if !ok {
		panic("roles.Serve: the handler does not say which route rows it serves")
	}
	mux := http.NewServeMux()
	fns := map[string]route.Function{}
	for _, r := range s.Routes() {
		if _, ok := fns[r.Pattern]; ok {
			continue // GET /healthz: on two functions, reads nothing
		}
		fns[r.Pattern] = r.Function
		mux.HandleFunc(r.Pattern, func(http.ResponseWriter, *http.Request) {})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			if f, ok := fns[pattern]; ok {
				r = r.WithContext(As(r.Context(), f.Resource()))
			}
		}
		h.ServeHTTP(w, r)
	})
}

// Enforce gives db's layer, for table, the role of every function of
// template.yaml: requests Client signs as a function are checked against
// its statements from now on. A template it cannot read, or a statement it
// cannot express, fails t.
func Enforce(t testing.TB, db *devstack.DynamoDB, table string) {
	t.Helper()
	ps, err := Load(table)
	if err != nil {
		t.Fatalf("roles: %v", err)
	}
	for id, p := range ps {
		db.Layer.Enforce(id, p)
	}
}

// Load reads template.yaml (at the root of the module the working
// directory is in) and returns the DynamoDB statements of each of its
// functions, by logical id, with the table's ARNs those of table.
func Load(table string) (map[string]ddbchaos.Policy, error) {
	path, err := templatePath()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(raw, table)
}

func templatePath() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "template.yaml"), nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

var yamlMu sync.Mutex

// Parse is Load of a template's text.
func Parse(template []byte, table string) (map[string]ddbchaos.Policy, error) {
	// goformation registers its YAML tags in a package map on every call:
	// one call at a time (tests enforce roles in parallel).
	yamlMu.Lock()
	js, err := intrinsics.ProcessYAML(template, infra.Placeholders())
	yamlMu.Unlock()
	if err != nil {
		return nil, err
	}
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				Policies json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, err
	}
	out := map[string]ddbchaos.Policy{}
	ids := make([]string, 0, len(doc.Resources))
	for id := range doc.Resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := doc.Resources[id]
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		var docs []struct {
			Statement []map[string]json.RawMessage
		}
		if len(r.Properties.Policies) > 0 {
			if err := json.Unmarshal(r.Properties.Policies, &docs); err != nil {
				return nil, fmt.Errorf("%s: Policies: want a list of inline documents: %w", id, err)
			}
		}
		var p ddbchaos.Policy
		for i, d := range docs {
			for j, raw := range d.Statement {
				st, ok, err := statement(raw, table)
				if err != nil {
					return nil, fmt.Errorf("%s.Policies[%d].Statement[%d]: %w", id, i, j, err)
				}
				if ok {
					p.Statements = append(p.Statements, st)
				}
			}
		}
		out[id] = p
	}
	if len(out) == 0 {
		return nil, errors.New("template has no functions")
	}
	return out, nil
}

func strs(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var list []string
	err := json.Unmarshal(raw, &list)
	return list, err
}

// statement translates one statement's DynamoDB part; ok is false for a
// statement granting nothing of DynamoDB.
func statement(raw map[string]json.RawMessage, table string) (ddbchaos.Statement, bool, error) {
	var st ddbchaos.Statement
	actions, err := strs(raw["Action"])
	if err != nil {
		return st, false, fmt.Errorf("Action: %w", err)
	}
	for _, a := range actions {
		if strings.HasPrefix(strings.ToLower(a), "dynamodb:") {
			st.Actions = append(st.Actions, a)
		}
	}
	if len(st.Actions) == 0 {
		return st, false, nil
	}
	for _, k := range []string{"NotAction", "NotResource", "Principal", "NotPrincipal"} {
		if _, ok := raw[k]; ok {
			return st, false, fmt.Errorf("%s cannot be checked here", k)
		}
	}
	var effect string
	if err := json.Unmarshal(raw["Effect"], &effect); err != nil || effect != "Allow" {
		return st, false, fmt.Errorf("Effect %s: only Allow statements can be checked here", raw["Effect"])
	}
	res, err := strs(raw["Resource"])
	if err != nil {
		return st, false, fmt.Errorf("Resource: %w", err)
	}
	arn := ddbchaos.TableARN(table)
	for _, r := range res {
		switch {
		case r == "GETATT:Table.Arn":
			st.Resources = append(st.Resources, arn)
		case r == "GETATT:Table.StreamArn":
			st.Resources = append(st.Resources, arn+"/stream/*")
		case strings.HasPrefix(r, "SUB:${Table.Arn}/"):
			st.Resources = append(st.Resources, arn+strings.TrimPrefix(r, "SUB:${Table.Arn}"))
		default:
			return st, false, fmt.Errorf("resource %q is not the table or one of its parts", r)
		}
	}
	if c, ok := raw["Condition"]; ok {
		var cond map[string]map[string]json.RawMessage
		if err := json.Unmarshal(c, &cond); err != nil {
			return st, false, fmt.Errorf("Condition: %w", err)
		}
		for op, keys := range cond {
			for key, v := range keys {
				vals, err := strs(v)
				if err != nil {
					return st, false, fmt.Errorf("Condition %s %s: %w", op, key, err)
				}
				switch {
				case op == "ForAllValues:StringLike" && key == "dynamodb:LeadingKeys":
					st.LeadingKeys = append(slices.Clip(st.LeadingKeys), vals...)
				case op == "ForAnyValue:StringEquals" && key == "dynamodb:EnclosingOperation":
					st.EnclosingOperations = append(slices.Clip(st.EnclosingOperations), vals...)
				default:
					return st, false, fmt.Errorf("condition %s on %s cannot be checked here", op, key)
				}
			}
		}
	}
	return st, true, nil
}
