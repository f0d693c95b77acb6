package admin

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strconv"
)

//go:embed status.html
var statusPage []byte

// serveStatus serves the status page: one HTML file with its script and
// style inline, which reads /stats, /admin/series, /admin/digest and
// /admin/workflows.
func (c *Console) serveStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	w.Write(statusPage)
}

// serveSeries answers the last ten minutes, one sample per second.
func (c *Console) serveSeries(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(c.env.Metrics.Series())
}

// serveDigest answers the query digest as JSON (GET, ?limit=N), or resets
// it (POST /admin/digest?reset=1).
func (c *Console) serveDigest(w http.ResponseWriter, r *http.Request) {
	d := c.env.Metrics.Digest()
	if d == nil {
		http.Error(w, "the query digest is off (digest_size: 0)", http.StatusNotFound)
		return
	}
	if r.Method == http.MethodPost {
		if r.URL.Query().Get("reset") == "" {
			http.Error(w, "POST /admin/digest?reset=1 forgets every shape", http.StatusBadRequest)
			return
		}
		d.Reset()
		w.Write([]byte("digest reset\n"))
		return
	}
	rows := d.Snapshot()
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n >= 0 && n < len(rows) {
		rows = rows[:n]
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(rows)
}
