package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/config"
)

// TestFrontPage: / serves the status page (behind web_user like /status),
// other unknown paths stay 404.
func TestFrontPage(t *testing.T) {
	tc := newTestConsole(t, nil)
	for _, c := range []struct {
		path string
		code int
	}{{"/", 200}, {"/status", 200}, {"/nope", 404}} {
		rec := tc.get(t, "GET", c.path)
		if rec.Code != c.code {
			t.Errorf("GET %s: %d, want %d", c.path, rec.Code, c.code)
		}
		if c.code == 200 && !strings.Contains(rec.Body.String(), "<title>shardgate status</title>") {
			t.Errorf("GET %s: not the status page", c.path)
		}
	}
	tc = newTestConsole(t, func(cfg *config.Config) { cfg.WebUser, cfg.WebPassword = "ops", "pw" })
	if rec := tc.get(t, "GET", "/"); rec.Code != http.StatusUnauthorized {
		t.Errorf("GET / without credentials: %d, want 401", rec.Code)
	}
}

// TestStreamsList: /admin/streams lists the open change streams with what
// they sent and their lag, and forgets a stream once it ends.
func TestStreamsList(t *testing.T) {
	tc := newTestConsole(t, nil)
	r := httptest.NewRequest("GET", "/changes?table=db.t", nil)
	st := tc.streams.add(r, []string{"db.t"})
	now := time.Now()
	st.sent(now.Add(-3*time.Second).Unix(), now)
	st.sent(now.Add(-2*time.Second).Unix(), now)
	var list []StreamStatus
	if err := json.Unmarshal(tc.get(t, "GET", "/admin/streams").Body.Bytes(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Changes != 2 || list[0].LagSeconds < 1 || list[0].LagSeconds > 3 || list[0].Tables[0] != "db.t" {
		t.Fatalf("streams: %+v", list)
	}
	tc.streams.remove(st)
	if body := tc.get(t, "GET", "/admin/streams").Body.String(); strings.TrimSpace(body) != "[]" {
		t.Fatalf("after the stream ended: %s", body)
	}
}
