package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// api talks to the proxy's admin listener.
type api struct {
	base string
}

// status is the part of GET /admin/workflows/NAME (move.Status) the
// benchmark reads.
type status struct {
	Spec struct {
		Name    string         `json:"name"`
		Options map[string]any `json:"options"`
	} `json:"spec"`
	State struct {
		Phase          string            `json:"phase"`
		Start          map[string]string `json:"start"`
		RowsTotal      int64             `json:"rows_total"`
		RowsCopied     int64             `json:"rows_copied"`
		CopySeconds    float64           `json:"copy_seconds"`
		ChangesApplied int64             `json:"changes_applied"`
		VerifyRows     int64             `json:"verify_rows"`
		VerifySeconds  float64           `json:"verify_seconds"`
		Diffs          []any             `json:"diffs"`
		Cutovers       int               `json:"cutover_attempts"`
		PauseMillis    float64           `json:"pause_ms"`
		Error          string            `json:"error"`
	} `json:"state"`
	Running    bool    `json:"running"`
	RowsPerSec float64 `json:"rows_per_sec"`
	LagSeconds float64 `json:"lag_seconds"`
}

// moveOptions are config.MoveOptions as the API takes them (Go field
// names; durations in nanoseconds). ThrottleLatency 0 is sent on purpose:
// the copy is not throttled.
type moveOptions struct {
	CopyWorkers     int
	BatchRows       int
	ApplyWorkers    int
	ThrottleLatency int64
	CutoverTimeout  int64 `json:",omitempty"`
}

var client = &http.Client{Timeout: 5 * time.Minute}

func (a *api) do(method, path string, body any, v any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if v != nil {
		return json.Unmarshal(data, v)
	}
	return nil
}

// start starts a reshard of sbtest.sbtest1 to 4+4 subtables.
func (a *api) start(name string, o moveOptions) error {
	return a.do("POST", "/admin/workflows", map[string]any{
		"table": "sbtest.sbtest1", "name": name, "nodes": []string{"node1", "node2"}, "locations": []int{4, 4}, "options": o,
	}, nil)
}

func (a *api) status(name string) (status, error) {
	var s status
	err := a.do("GET", "/admin/workflows/"+name, nil, &s)
	return s, err
}

func (a *api) list() ([]status, error) {
	var s []status
	err := a.do("GET", "/admin/workflows", nil, &s)
	return s, err
}

// command posts a command and returns the status it answers with and how
// long the request took.
func (a *api) command(name, cmd string) (status, time.Time, time.Time, error) {
	var s status
	t0 := time.Now()
	err := a.do("POST", "/admin/workflows/"+name+"/"+cmd, nil, &s)
	return s, t0, time.Now(), err
}

// poll is one status sample.
type poll struct {
	T       float64 `json:"t"` // seconds since the workflow was started
	Phase   string  `json:"phase"`
	Copied  int64   `json:"rows_copied"`
	Applied int64   `json:"changes_applied"`
	Lag     float64 `json:"lag_s"`
}

// waitPhase polls name every 100 ms until until(status) holds, recording
// every sample; a workflow error that lasts 30 s fails it.
func (a *api) waitPhase(name string, t0 time.Time, until func(*status) bool, samples *[]poll, limit time.Duration) (status, error) {
	var errSince time.Time
	deadline := time.Now().Add(limit)
	for {
		s, err := a.status(name)
		if err != nil {
			return s, err
		}
		if samples != nil {
			*samples = append(*samples, poll{T: time.Since(t0).Seconds(), Phase: s.State.Phase, Copied: s.State.RowsCopied, Applied: s.State.ChangesApplied, Lag: s.LagSeconds})
		}
		if until(&s) {
			return s, nil
		}
		if s.State.Error != "" {
			if errSince.IsZero() {
				errSince = time.Now()
			} else if time.Since(errSince) > 30*time.Second {
				return s, fmt.Errorf("workflow %s (%s): %s", name, s.State.Phase, s.State.Error)
			}
		} else {
			errSince = time.Time{}
		}
		if !s.Running {
			return s, fmt.Errorf("workflow %s stopped in phase %s (%s)", name, s.State.Phase, s.State.Error)
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("workflow %s: still %s after %v", name, s.State.Phase, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
