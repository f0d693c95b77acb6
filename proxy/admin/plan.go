package admin

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/move"
)

// Planner computes and applies plans (the server's).
type Planner interface {
	Plan(yaml []byte) (*move.Plan, error)
	Apply(yaml []byte, version uint64) (*move.Applied, error)
}

// Errors a Planner wraps to say which answer the request gets: a file
// that does not parse or validate (400), and an apply that cannot go
// ahead: a stale version, refusals, a fleet (409).
var (
	ErrBadConfig = errors.New("bad configuration")
	ErrConflict  = errors.New("conflict")
)

// servePlan answers POST /admin/plan (body: a ks.yaml text) with the plan
// as JSON (move.Plan).
func (c *Console) servePlan(w http.ResponseWriter, r *http.Request) {
	if !c.planning(w, r) {
		return
	}
	text, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
	if err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	p, err := c.env.Plans.Plan(text)
	if err != nil {
		planError(w, err)
		return
	}
	replyJSON(w, p)
}

// serveApply answers POST /admin/apply (move.ApplyRequest) with what it
// did (move.Applied), or 409 with why nothing changed.
func (c *Console) serveApply(w http.ResponseWriter, r *http.Request) {
	if !c.planning(w, r) {
		return
	}
	var req move.ApplyRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20)).Decode(&req); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	res, err := c.env.Plans.Apply([]byte(req.Config), req.Version)
	if err != nil {
		c.env.Log.Warn("apply refused", zap.Error(err))
		planError(w, err)
		return
	}
	c.env.Log.Info("plan applied", zap.Uint64("planned_version", req.Version), zap.Bool("reloaded", res.Reloaded),
		zap.Uint64("version", res.Version), zap.Strings("workflows", res.Started))
	replyJSON(w, res)
}

func (c *Console) planning(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return false
	}
	if c.env.Plans == nil {
		http.Error(w, "this proxy does not plan configuration changes", http.StatusServiceUnavailable)
		return false
	}
	return true
}

func planError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrBadConfig):
		code = http.StatusBadRequest
	case errors.Is(err, ErrConflict):
		code = http.StatusConflict
	}
	http.Error(w, err.Error(), code)
}

func replyJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
