package control

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/policy"
	"github.com/fluidbox/fluidbox/shared/policy/policyyaml"
	"github.com/fluidbox/fluidbox/shared/store"
)

type policyView struct {
	ID        string          `json:"id"`
	Version   int             `json:"version"`
	Name      string          `json:"name"`
	Digest    string          `json:"digest"`
	Document  json.RawMessage `json:"document"`
	CreatedAt string          `json:"created_at"`
	// Warnings are "field: message" lines, as a run's are.
	Warnings []string `json:"warnings,omitempty"`
}

func policyOut(v store.PolicyVersion) policyView {
	return policyView{ID: v.PolicyID, Version: v.Version, Name: v.Name, Digest: v.Digest, Document: json.RawMessage(v.Document), CreatedAt: v.CreatedAt}
}

// parsePolicy reads and validates a policy document (JSON or YAML).
func parsePolicy(w http.ResponseWriter, r *http.Request) (*policy.Policy, []policy.Warning, error) {
	body, e := readBody(w, r)
	if e != nil {
		return nil, nil, e
	}
	p, warnings, err := policyyaml.Parse(body)
	var ve *policy.ValidationError
	if errors.As(err, &ve) {
		return nil, nil, invalid("%s", ve.Error())
	}
	if err != nil {
		return nil, nil, invalid("the policy document could not be read")
	}
	if failed := p.RunTests(); len(failed) > 0 {
		lines := make([]string, len(failed))
		for i, f := range failed {
			lines[i] = f.String()
		}
		return nil, nil, invalid("%d of the document's %d tests failed: %s", len(failed), len(p.Document().Tests), strings.Join(lines, "; "))
	}
	return p, warnings, nil
}

func (s *Server) storePolicy(w http.ResponseWriter, r *http.Request, id string, version int, p *policy.Policy, warnings []policy.Warning, status int) error {
	doc, err := json.Marshal(p.Document())
	if err != nil {
		return err
	}
	if len(doc) > policy.MaxDocumentBytes {
		return invalid("the policy document is %d bytes as stored, over the %d-byte limit", len(doc), policy.MaxDocumentBytes)
	}
	v := store.PolicyVersion{
		PolicyID:  id,
		Version:   version,
		Name:      p.Document().Name,
		Digest:    p.Digest(),
		Document:  string(doc),
		CreatedAt: store.FormatTime(s.cfg.Now()),
	}
	if err := s.st.PutPolicyVersion(r.Context(), v); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return conflict("policy %s changed while this version was written; retry", id)
		}
		return err
	}
	out := policyOut(v)
	for _, warning := range warnings {
		out.Warnings = append(out.Warnings, warning.String())
	}
	writeJSON(w, status, out)
	return nil
}

func (s *Server) createPolicy(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	p, warnings, err := parsePolicy(w, r)
	if err != nil {
		return err
	}
	return s.storePolicy(w, r, ids.New("pol_"), 1, p, warnings, http.StatusCreated)
}

func (s *Server) updatePolicy(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id := r.PathValue("id")
	latest, err := s.st.GetPolicy(r.Context(), id, 0)
	if errors.Is(err, store.ErrNotFound) || !ids.Valid("pol_", id) {
		return notFound("policy " + id)
	}
	if err != nil {
		return err
	}
	p, warnings, err := parsePolicy(w, r)
	if err != nil {
		return err
	}
	return s.storePolicy(w, r, id, latest.Version+1, p, warnings, http.StatusOK)
}

func (s *Server) getPolicy(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	return s.writePolicy(w, r, 0)
}

func (s *Server) getPolicyVersion(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	n, err := versionParam(r)
	if err != nil {
		return err
	}
	return s.writePolicy(w, r, n)
}

// versionParam is the {n} of a .../versions/{n} route.
func versionParam(r *http.Request) (int, error) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		return 0, invalid("version: must be a positive integer")
	}
	return n, nil
}

func (s *Server) writePolicy(w http.ResponseWriter, r *http.Request, n int) error {
	id := r.PathValue("id")
	if !ids.Valid("pol_", id) {
		return notFound("policy " + id)
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
	writeJSON(w, http.StatusOK, policyOut(v))
	return nil
}
