package control

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/evaluation"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/run"
	"github.com/fluidbox/fluidbox/shared/store"
)

func (s *Server) evaluatePolicy(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.evaluate(w, r, 0)
}

func (s *Server) evaluatePolicyVersion(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	n, err := versionParam(r)
	if err != nil {
		return err
	}
	return s.evaluate(w, r, n)
}

// evaluate decides one call against a stored policy version as a run with
// the request's tier, autonomy and workspace would, with no run, no
// approval and no ledger entry: it reads the policy and writes nothing.
func (s *Server) evaluate(w http.ResponseWriter, r *http.Request, n int) error {
	id := r.PathValue("id")
	if !ids.Valid("pol_", id) {
		return notFound("policy " + id)
	}
	var req evaluation.Request
	if e := decode(w, r, &req); e != nil {
		return e
	}
	if err := req.Check(); err != nil {
		return invalid("%s", err)
	}
	v, err := s.st.GetPolicy(r.Context(), id, n)
	if errors.Is(err, store.ErrNotFound) {
		if n > 0 {
			return notFound("version " + strconv.Itoa(n) + " of policy " + id)
		}
		return notFound("policy " + id)
	}
	if err != nil {
		return err
	}
	p, _, err := policy.Parse([]byte(v.Document))
	if err != nil {
		return err // a stored version always parses; this is an internal failure
	}
	// A name the gate would give a connection's tool is judged as that
	// brokered tool, which a read_only run may never call.
	conn := ""
	if req.Class != "" && !evaluation.Builtin(req.ToolName) {
		if conn, err = s.brokeredBy(r.Context(), req.ToolName); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, evaluation.Decide(evaluation.Policy{Policy: p, ID: v.PolicyID, Version: v.Version, Digest: v.Digest}, req, conn))
	return nil
}

// brokeredBy returns the id of the connection whose brokered tool name is
// (mcp__<connection>__<tool>, as runs freeze them), or "" when name is not
// one of an existing connection's.
func (s *Server) brokeredBy(ctx context.Context, name string) (string, error) {
	conn, ok := run.BrokeredConnection(name)
	if !ok {
		return "", nil
	}
	id, err := s.st.ConnectionIDByName(ctx, conn)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return id, err
}
