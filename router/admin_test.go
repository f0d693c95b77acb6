package router

import (
	"errors"
	"slices"
	"testing"

	"github.com/shardgate/shardgate/mysql"
)

func TestParseAdmin(t *testing.T) {
	tests := []struct {
		sql  string
		ok   bool
		code uint16
		want Admin
	}{
		{"admin node(opt,node,k,v) values('add','node1','slave','127.0.0.1:3307')", true, 0,
			Admin{"node", []string{"add", "node1", "slave", "127.0.0.1:3307"}}},
		{"ADMIN Server (opt,k,v) VALUES ('change', 'slow_log_time', '100');", true, 0,
			Admin{"server", []string{"change", "slow_log_time", "100"}}},
		{"admin workflow(opt,name) values('cutover', 'it''s')", true, 0, Admin{"workflow", []string{"cutover", "it's"}}},
		{"show proxy config", true, 0, Admin{"server", []string{"show", "proxy", "config"}}},
		{"SHOW workflow STATUS", true, 0, Admin{"server", []string{"show", "workflow", "config"}}},
		{"show shardgate digest", true, 0, Admin{"digest", []string{"show"}}},
		{"show tables", false, 0, Admin{}},
		{"admin node values", true, mysql.ErSyntax, Admin{}},
		{"admin node(opt) values(add)", true, mysql.ErSyntax, Admin{}},
		{"select 1", false, 0, Admin{}},
		{`admin server(opt,k,v) values('a\'b', '', 'it''s')`, true, 0, Admin{"server", []string{`a\'b`, "", "it's"}}},
		{"admin server(opt,k,v) values('a', b)", true, mysql.ErSyntax, Admin{}},
		{"admin server(opt,k,v) values()", true, mysql.ErSyntax, Admin{}},
	}
	for _, tt := range tests {
		st := Classify(tt.sql, 0)
		a, ok, err := ParseAdmin(tt.sql, st.Keyword)
		var se *mysql.SQLError
		code := uint16(0)
		if errors.As(err, &se) {
			code = se.Code
		}
		if ok != tt.ok || code != tt.code || a.Target != tt.want.Target || !slices.Equal(a.Values, tt.want.Values) {
			t.Errorf("ParseAdmin(%q) = %+v, %v, %v; want %+v, %v, code %d", tt.sql, a, ok, err, tt.want, tt.ok, tt.code)
		}
	}
}
