//go:build !race

package mysql

// raceEnabled reports whether the test binary runs under the race detector,
// which makes compress/flate many times slower.
const raceEnabled = false
