package control

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/capability"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/store"
)

type capabilityRequest struct {
	Name  string            `json:"name"`
	Tools []capability.Tool `json:"tools"`
}

type capabilityView struct {
	capability.Bundle
	Builtin   bool   `json:"builtin"`
	CreatedAt string `json:"created_at,omitempty"`
}

func (s *Server) createCapability(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	var req capabilityRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	for _, b := range capability.Builtin() {
		if b.Name == req.Name {
			return conflict("a capability bundle named %q exists", req.Name)
		}
	}
	b, err := capability.NewBundle(ids.New("cap_"), req.Name, req.Tools)
	var fe *capability.FieldError
	if errors.As(err, &fe) {
		return invalid("%s", fe.Error())
	}
	if err != nil {
		return invalid("the capability bundle is not valid")
	}
	tools, err := json.Marshal(b.Tools)
	if err != nil {
		return err
	}
	now := store.FormatTime(s.cfg.Now())
	err = s.st.PutCapability(r.Context(), store.Capability{ID: b.ID, Name: b.Name, Digest: b.Digest, Tools: string(tools), CreatedAt: now})
	if errors.Is(err, store.ErrNameTaken) {
		return conflict("a capability bundle named %q exists", req.Name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, capabilityView{Bundle: b, CreatedAt: now})
	return nil
}

func capabilityOut(c store.Capability) (capabilityView, error) {
	v := capabilityView{Bundle: capability.Bundle{ID: c.ID, Name: c.Name, Digest: c.Digest}, CreatedAt: c.CreatedAt}
	err := json.Unmarshal([]byte(c.Tools), &v.Tools)
	return v, err
}

func (s *Server) listCapabilities(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	out := []capabilityView{}
	for _, b := range capability.Builtin() {
		out = append(out, capabilityView{Bundle: b, Builtin: true})
	}
	stored, err := s.st.ListCapabilities(r.Context())
	if err != nil {
		return err
	}
	for _, c := range stored {
		v, err := capabilityOut(c)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"capabilities": out})
	return nil
}

func (s *Server) getCapability(w http.ResponseWriter, r *http.Request, _ auth.Principal) error {
	id := r.PathValue("id")
	for _, b := range capability.Builtin() {
		if b.ID == id || b.Name == id {
			writeJSON(w, http.StatusOK, capabilityView{Bundle: b, Builtin: true})
			return nil
		}
	}
	if !ids.Valid("cap_", id) {
		return notFound("capability " + id)
	}
	c, err := s.st.GetCapability(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("capability " + id)
	}
	if err != nil {
		return err
	}
	v, err := capabilityOut(c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
