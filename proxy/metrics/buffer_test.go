package metrics

import (
	"strings"
	"testing"
)

// TestBufferSeries: the cutover buffer's counts are scraped under their
// Vitess-style names, evictions by reason.
func TestBufferSeries(t *testing.T) {
	m := New(Options{DigestSize: 10, Collector: Collector{Stats: func() Stats {
		return Stats{Buffer: BufferStats{Buffered: 7, Drained: 5, Evicted: map[string]uint64{"buffer_full": 1, "window_exceeded": 1},
			Held: 0, Pauses: 2, LastPauseSeconds: 0.04, PauseSecondsSum: 0.1, AcksMissing: 1}}
	}}})
	out := scrape(t, m)
	for _, want := range []string{
		"shardgate_buffer_statements_buffered_total 7",
		"shardgate_buffer_statements_drained_total 5",
		`shardgate_buffer_statements_evicted_total{reason="buffer_full"} 1`,
		`shardgate_buffer_statements_evicted_total{reason="window_exceeded"} 1`,
		"shardgate_buffer_statements 0",
		"shardgate_buffer_pauses_total 2",
		"shardgate_buffer_last_pause_seconds 0.04",
		"shardgate_buffer_pause_seconds_sum 0.1",
		"shardgate_cutover_acks_missing_total 1",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
}
