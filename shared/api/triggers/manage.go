package triggers

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/fluidbox/fluidbox/shared/auth"
	"github.com/fluidbox/fluidbox/shared/ids"
	"github.com/fluidbox/fluidbox/shared/store"
)

// storedTrigger reads the configuration named in the path.
func (s *Server) storedTrigger(r *http.Request) (store.Trigger, error) {
	id := r.PathValue("id")
	if !ids.Valid("trg_", id) {
		return store.Trigger{}, notFound("trigger " + id)
	}
	t, err := s.st.GetTrigger(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Trigger{}, notFound("trigger " + id)
	}
	return t, err
}

// updateTrigger serves PUT /v1/triggers/{id}: the whole configuration
// again, checked as at creation. The repository cannot change (delete the
// configuration and create another); runs created before keep what they
// froze. With "rotate_runner_key" the trigger gets a new runner key,
// returned once.
func (s *Server) updateTrigger(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	cur, err := s.storedTrigger(r)
	if err != nil {
		return err
	}
	var req triggerRequest
	if e := decode(w, r, &req); e != nil {
		return e
	}
	if req.Repository != cur.Repository {
		return invalid("repository: a configuration's repository cannot change (it is %q); delete it and create one for the other repository", cur.Repository)
	}
	t, err := s.checkTrigger(r, req)
	if err != nil {
		return err
	}
	t.ID, t.CreatedAt, t.CreatedBy, t.RunnerKeyHash = cur.ID, cur.CreatedAt, cur.CreatedBy, cur.RunnerKeyHash
	t.Revision, t.UpdatedAt = cur.Revision+1, store.FormatTime(s.cfg.Now())
	switch {
	case t.Schedule == "":
	case t.Schedule == cur.Schedule:
		t.ScheduleSince = cur.ScheduleSince
	default:
		// A new expression counts from now: nothing it would have been
		// due at before fires.
		t.ScheduleSince = t.UpdatedAt
	}
	var key auth.Token
	if req.RotateRunnerKey {
		if key, t.RunnerKeyHash, err = auth.NewTriggerKey(); err != nil {
			return err
		}
	}
	err = s.st.UpdateTrigger(r.Context(), t)
	if errors.Is(err, store.ErrTriggerChanged) {
		return conflict("trigger %s changed since it was read (another update or a deletion); read it again", t.ID)
	}
	if err != nil {
		return fmt.Errorf("api: update trigger: %w", err)
	}
	s.log.InfoContext(r.Context(), "trigger updated", "trigger", t.ID, "revision", t.Revision, "by", who.Subject, "runner_key_rotated", req.RotateRunnerKey)
	out := triggerOut(t)
	if t.OwnSecret && !cur.OwnSecret {
		// The update gave the trigger its own secret: this answer is the
		// one that shows it, as creation's does for a trigger created so.
		out.WebhookSecret = triggerSecret(s.cfg.GitHubWebhookSecret, t.ID)
	}
	if req.RotateRunnerKey {
		out.RunnerKey = key.Reveal()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// deleteTrigger serves DELETE /v1/triggers/{id}: later deliveries for its
// repository are ignored (202) and its runner key stops working; runs it
// created keep running under what they froze.
func (s *Server) deleteTrigger(w http.ResponseWriter, r *http.Request, who auth.Principal) error {
	cur, err := s.storedTrigger(r)
	if err != nil {
		return err
	}
	t, err := s.st.DeleteTrigger(r.Context(), cur.ID)
	if errors.Is(err, store.ErrNotFound) {
		return notFound("trigger " + cur.ID)
	}
	if err != nil {
		return fmt.Errorf("api: delete trigger: %w", err)
	}
	s.log.InfoContext(r.Context(), "trigger deleted", "trigger", t.ID, "repository", t.Repository, "by", who.Subject)
	writeJSON(w, http.StatusOK, map[string]string{"id": t.ID, "status": "deleted"})
	return nil
}
