package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestFormat: the version line of a stamped build, of a build with
// uncommitted changes, of one without VCS stamping and of a binary
// without build information.
func TestFormat(t *testing.T) {
	const rev = "bae0f036b7ef402d8abffa269399100e2fb8eb12"
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	stamped := func(modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261127150936-bae0f036b7ef"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
				{Key: "vcs.time", Value: "2026-11-27T15:09:36Z"}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, c := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		{stamped("false"), "proxy v0.0.0-20261127150936-bae0f036b7ef commit " + rev + " (2026-11-27T15:09:36Z) go1.26.8" + platform},
		{stamped("true"), "proxy v0.0.0-20261127150936-bae0f036b7ef commit " + rev + " (2026-11-27T15:09:36Z, modified) go1.26.8" + platform},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"proxy (devel) commit unknown (built without VCS stamping: -buildvcs=false or outside a git checkout) go1.26.8" + platform},
		{nil, "proxy (unknown) commit unknown (built without VCS stamping: -buildvcs=false or outside a git checkout) " + runtime.Version() + platform},
	} {
		if got := format("proxy", c.bi); got != c.want {
			t.Errorf("format =\n%s\nwant\n%s", got, c.want)
		}
	}
	// The test binary's own line names the program and the Go version.
	if s := String("x"); !strings.HasPrefix(s, "x ") || !strings.Contains(s, runtime.Version()) {
		t.Errorf("String(x) = %q", s)
	}
}
