// Package buildinfo says which build of shardgate a binary is: the module
// version and the commit the go tool stamped into it (runtime/debug's
// build information: vcs.revision, vcs.time, vcs.modified). Both binaries
// print it for -version (bin/proxy) and version (bin/shardgate), so an
// operator can tell which code a proxy runs.
//
// The go tool stamps the commit when it builds in a git checkout with
// -buildvcs on (its default, auto); a build without it (-buildvcs=false,
// go run, a build outside the checkout) says the commit is unknown.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// String is program's version line, for example
//
//	proxy v0.0.0-20261127150936-bae0f036b7ef+dirty commit bae0f036b7ef402d8abffa269399100e2fb8eb12 (2026-11-27T15:09:36Z, modified) go1.26.8 linux/amd64
func String(program string) string {
	bi, _ := debug.ReadBuildInfo() // nil when the binary has none
	return format(program, bi)
}

// format is String for the build information bi (nil: none).
func format(program string, bi *debug.BuildInfo) string {
	version, goVersion := "(unknown)", runtime.Version()
	settings := map[string]string{}
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s ", program, version)
	if rev := settings["vcs.revision"]; rev != "" {
		var notes []string
		if t := settings["vcs.time"]; t != "" {
			notes = append(notes, t)
		}
		if settings["vcs.modified"] == "true" {
			notes = append(notes, "modified")
		}
		fmt.Fprintf(&b, "commit %s", rev)
		if len(notes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(notes, ", "))
		}
	} else {
		b.WriteString("commit unknown (built without VCS stamping: -buildvcs=false or outside a git checkout)")
	}
	fmt.Fprintf(&b, " %s %s/%s", goVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}
