package server

import (
	"fmt"
	"strings"
	"syscall"

	"github.com/shardgate/shardgate/proxy/session"
)

// FailpointKnobs returns knobs (Options.Knobs) that make the proxy kill
// itself with SIGKILL at one point of a two-phase commit, for tests of
// recovery against the real process (environment variable
// SHARDGATE_FAILPOINT, which cmd/proxy reads and passes on; never set it
// in production):
//
//	xa-before-decision        every branch prepared, no decision written
//	xa-before-commit:<node>   decision written, XA COMMIT about to go to <node>
func FailpointKnobs(spec string) (*session.Knobs, error) {
	stage, node, _ := strings.Cut(spec, ":")
	var want string
	switch stage {
	case "xa-before-decision":
		want = session.XABeforeDecision
	case "xa-before-commit":
		want = session.XABeforeCommit
		if node == "" {
			return nil, fmt.Errorf("failpoint %q: name the node (xa-before-commit:<node>)", spec)
		}
	default:
		return nil, fmt.Errorf("unknown failpoint %q (xa-before-decision, xa-before-commit:<node>)", spec)
	}
	h := func(s, n string) {
		if s == want && n == node {
			syscall.Kill(syscall.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	k := &session.Knobs{}
	k.XAStage.Store(&h)
	return k, nil
}
