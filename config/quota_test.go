package config

import (
	"errors"
	"reflect"
	"testing"
)

// TestBackendQuota: a user's own max_backend_conns, else three quarters of
// a node's limit when user_list has several users, else none.
func TestBackendQuota(t *testing.T) {
	c := Default()
	c.Users = []User{{User: "a"}}
	if most, share := c.BackendQuota("a"); most != 0 || share != 0 {
		t.Errorf("one user: quota %d, share %d; want none", most, share)
	}
	c.Users = []User{{User: "a", MaxBackendConns: 8}, {User: "b"}}
	if most, share := c.BackendQuota("a"); most != 8 || share != 0 {
		t.Errorf("a: quota %d, share %d; want 8", most, share)
	}
	if most, share := c.BackendQuota("b"); most != 0 || share != DefaultUserShare {
		t.Errorf("b: quota %d, share %d; want share %d", most, share, DefaultUserShare)
	}
	if !c.Backend.PoolGrowth || c.Backend.ServerHeadroom != 0 {
		t.Errorf("pool_growth %v, server_headroom %d: want true, 0", c.Backend.PoolGrowth, c.Backend.ServerHeadroom)
	}
}

func TestQuotaProblems(t *testing.T) {
	c := Default()
	c.Users = []User{{User: "u", MaxBackendConns: -1}}
	c.Nodes = []Node{{Name: "n", Master: "db:3306"}}
	c.Schemas = []Schema{{User: "u", Nodes: []string{"n"}, Default: "n"}}
	c.Backend.ServerHeadroom = -2
	var ce *Error
	if err := c.Validate(); !errors.As(err, &ce) {
		t.Fatalf("Validate = %v, want *Error", err)
	}
	want := []Problem{
		{"backend.server_headroom", 0, "must not be negative (0 is a tenth of max_connections), got -2"},
		{"user_list[0].max_backend_conns", 0, "must not be negative (0 is the default quota), got -1"},
	}
	if !reflect.DeepEqual(ce.Problems, want) {
		t.Errorf("problems = %+v, want %+v", ce.Problems, want)
	}
}
