package etcdtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// gateway posts a request to etcd's JSON gateway (/v3/...) and decodes the answer.
func gateway(t *testing.T, s *Server, path string, req, resp any) error {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	r, err := hc.Post(s.ClientURL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer r.Body.Close()
	return json.NewDecoder(r.Body).Decode(resp)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestStopRestart checks that a key written before Kill and before Stop is there after Restart on the same
// endpoint, and that nothing answers while the server is down.
func TestStopRestart(t *testing.T) {
	s := Start(t)
	put := func(k, v string) {
		var out map[string]any
		if err := gateway(t, s, "/v3/kv/put", map[string]string{"key": b64(k), "value": b64(v)}, &out); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	get := func(k string) string {
		var out struct {
			KVs []struct{ Value string } `json:"kvs"`
		}
		if err := gateway(t, s, "/v3/kv/range", map[string]string{"key": b64(k)}, &out); err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		if len(out.KVs) != 1 {
			return ""
		}
		v, _ := base64.StdEncoding.DecodeString(out.KVs[0].Value)
		return string(v)
	}
	put("a", "1")
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Pid() != 0 {
		t.Fatal("Pid after Kill is not 0")
	}
	if err := gateway(t, s, "/v3/kv/range", map[string]string{"key": b64("a")}, new(map[string]any)); err == nil {
		t.Fatal("a killed etcd answered")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := get("a"); got != "1" {
		t.Fatalf("after Kill and Restart: a = %q, want 1", got)
	}
	put("b", "2")
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := get("b"); got != "2" {
		t.Fatalf("after Stop and Restart: b = %q, want 2", got)
	}
}
