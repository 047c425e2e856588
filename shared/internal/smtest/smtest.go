// Package smtest is a Secrets Manager stand-in on 127.0.0.1 for the AWS
// launcher's tests: the real SDK client talks to it over HTTP (AWS JSON
// 1.1), and it keeps the three operations the launcher uses with their
// service's rules (a name is created once; a value read by name; a forced
// delete removes it at once), and a log of who (the request's access key,
// as roles.Client signs it) did what.
package smtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go/middleware"

	"github.com/fluidbox/fluidbox/shared/store"
)

// Call is one request the server answered.
type Call struct {
	// Key is the access key the request was signed with; Op the operation
	// (CreateSecret, GetSecretValue, DeleteSecret); Name the secret; OK
	// whether it succeeded.
	Key, Op, Name string
	OK            bool
}

// Server is the stand-in.
type Server struct {
	URL string

	srv     *httptest.Server
	mu      sync.Mutex
	secrets map[string]string
	calls   []Call
}

// New starts a server that closes with t.
func New(t testing.TB) *Server {
	t.Helper()
	s := Start()
	t.Cleanup(s.Close)
	return s
}

// Start starts a server; Close stops it.
func Start() *Server {
	s := &Server{secrets: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Client is an SDK client of s signing with access key key.
func (s *Server) Client(key string) *secretsmanager.Client {
	return secretsmanager.New(secretsmanager.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: key, SecretAccessKey: "test"}, nil
		}),
		RetryMaxAttempts: 1,
		APIOptions:       []func(*middleware.Stack) error{store.BodyWithoutWriteTo},
	})
}

// Value is a secret's value and whether it exists.
func (s *Server) Value(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.secrets[name]
	return v, ok
}

// Names are the secrets that exist.
func (s *Server) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.secrets {
		out = append(out, n)
	}
	return out
}

// Calls is what the server answered, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

var credential = regexp.MustCompile(`Credential=([^/]+)/`)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager.")
	if r.Method != http.MethodPost || !ok {
		fail(w, "UnknownOperationException", "no such operation")
		return
	}
	var key string
	if m := credential.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
		key = m[1]
	}
	var in struct {
		Name, SecretId, SecretString string
		ForceDeleteWithoutRecovery   bool
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(w, "InvalidRequestException", "body is not JSON")
		return
	}
	name := in.Name + in.SecretId
	s.mu.Lock()
	defer s.mu.Unlock()
	call := Call{Key: key, Op: op, Name: name}
	defer func() { s.calls = append(s.calls, call) }()
	switch op {
	case "CreateSecret":
		if _, ok := s.secrets[name]; ok {
			fail(w, "ResourceExistsException", "the secret exists")
			return
		}
		s.secrets[name] = in.SecretString
		call.OK = true
		answer(w, map[string]any{"ARN": arn(name), "Name": name})
	case "GetSecretValue":
		v, ok := s.secrets[name]
		if !ok {
			fail(w, "ResourceNotFoundException", "no such secret")
			return
		}
		call.OK = true
		answer(w, map[string]any{"ARN": arn(name), "Name": name, "SecretString": v})
	case "DeleteSecret":
		if !in.ForceDeleteWithoutRecovery {
			fail(w, "InvalidParameterException", "this stand-in deletes only without recovery")
			return
		}
		if _, ok := s.secrets[name]; !ok {
			fail(w, "ResourceNotFoundException", "no such secret")
			return
		}
		delete(s.secrets, name)
		call.OK = true
		answer(w, map[string]any{"ARN": arn(name), "Name": name})
	default:
		fail(w, "UnknownOperationException", "no such operation")
	}
}

func arn(name string) string {
	return "arn:aws:secretsmanager:us-east-1:000000000000:secret:" + name + "-AbCdEf"
}

func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}
