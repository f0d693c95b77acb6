package topo

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the package if a goroutine of this package outlives the tests: every watch ends with its
// context, every Leadership's watcher with its term.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(5 * time.Second); leaked != "" {
			fmt.Fprintf(os.Stderr, "topo: goroutines left after the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to d for the package's goroutines to end and returns the stacks of those left.
func leakedGoroutines(d time.Duration) string {
	owned := []string{"topo.(*Store).", "topo.(*Leadership).", "topo.(*Membership).", "topo.campaign"}
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			for _, o := range owned {
				if strings.Contains(g, o) {
					left = append(left, g)
					break
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return strings.Join(left, "\n\n")
		}
	}
}
