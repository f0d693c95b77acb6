package backend_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/mysql"
)

// TestServerStateTracking pins what MariaDB reports through the session
// trackers a pooled connection turns on, statement by statement: the
// session layer decides from these reports which connections carry state
// (session.State.absorb), and from the statement's text what the server
// does not report (router.Classify). A server that reports differently
// fails here first.
func TestServerStateTracking(t *testing.T) {
	s := need(t)
	c, err := backend.Dial(context.Background(), s.Addr, backend.DialOptions{User: s.User, Password: s.Password, DB: "mysql", DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Tracking() {
		t.Fatal("session tracking is off on a MariaDB connection")
	}
	for _, tc := range []struct{ sql, want string }{
		// Reported as a change of session state.
		{"SET @x = 1", "state"},
		{"SET SESSION sql_select_limit = 1", "var sql_select_limit=1 | state"},
		{"SET @y = 1 /*M!, SESSION sql_mode = 'NO_BACKSLASH_ESCAPES' */", "var sql_mode=NO_BACKSLASH_ESCAPES | state"},
		{"CREATE TEMPORARY TABLE tt (a INT)", "state"},
		{"PREPARE s FROM 'SELECT 1'", "state"},
		{"SET NAMES latin1", "var character_set_results=latin1 | var character_set_client=latin1 | var character_set_connection=latin1 | state"},
		{"SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED", "characteristics SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED;"},
		// Transactions: their state and characteristics only.
		{"START TRANSACTION", "txstate T_______ | characteristics SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED; START TRANSACTION;"},
		{"COMMIT", "txstate ________ | characteristics "},
		// Not reported at all: the statement's text must tell.
		{"SELECT 1 INTO @z", ""},
		{"SELECT LAST_INSERT_ID(42)", ""},
		{"DO GET_LOCK('tracking_t', 0)", ""},
		{"DO RELEASE_LOCK('tracking_t')", ""},
	} {
		res, err := c.Exec(tc.sql)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		changes, err := mysql.ParseStateChanges(res.State)
		if err != nil {
			t.Fatalf("%s: %v", tc.sql, err)
		}
		var got []string
		for _, ch := range changes {
			switch ch.Type {
			case mysql.TrackSystemVariables:
				n, v, _ := ch.SystemVariable()
				got = append(got, fmt.Sprintf("var %s=%s", n, v))
			case mysql.TrackStateChange:
				got = append(got, "state")
			case mysql.TrackTransactionState:
				got = append(got, "txstate "+string(ch.Data[1:]))
			case mysql.TrackTransactionCharacteristics:
				got = append(got, "characteristics "+string(ch.Data[min(1, len(ch.Data)):]))
			default:
				got = append(got, fmt.Sprintf("type %d %q", ch.Type, ch.Data))
			}
		}
		// Entries of one report come in no fixed order.
		slices.Sort(got)
		want := strings.Split(tc.want, " | ")
		if tc.want == "" {
			want = nil
		}
		slices.Sort(want)
		if g := strings.Join(got, " | "); g != strings.Join(want, " | ") {
			t.Errorf("%s: reported %q, want %q", tc.sql, g, tc.want)
		}
	}
}
