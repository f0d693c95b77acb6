package metrics

// BufferStats are the statements cutovers held in this proxy (Vitess's
// vtgate buffer metrics): a cutover shuts the table's gate, statements on
// the table wait at it (buffered), and run once it opens (drained) unless
// the buffer was full or they waited past buffer_window (evicted, with
// 1205). Pauses are the times this proxy kept a table's gate shut, as the
// proxy that cut over or as one of its fleet.
type BufferStats struct {
	Buffered uint64 `json:"buffered_total"`
	Drained  uint64 `json:"drained_total"`
	// Evicted counts by reason: buffer_full, window_exceeded.
	Evicted map[string]uint64 `json:"evicted_total"`
	// Held is the statements waiting now.
	Held int `json:"held"`
	// Pauses counts the gates shut and opened again; LastPauseSeconds is
	// the last one's length, PauseSecondsSum their sum.
	Pauses           uint64  `json:"pauses_total"`
	LastPauseSeconds float64 `json:"last_pause_seconds"`
	PauseSecondsSum  float64 `json:"pause_seconds_sum"`
	// AcksMissing counts the live proxies of the fleet that had not held
	// the table when a cutover of this proxy stopped waiting for them
	// (cutover_ack_wait): they meet the fence instead.
	AcksMissing uint64 `json:"cutover_acks_missing_total"`
}

// EvictReasons are the reasons a held statement is evicted, in the order
// the series are sent.
var EvictReasons = []string{"buffer_full", "window_exceeded"}

// buffer sends the cutover buffer's series.
func (e emitter) buffer(b BufferStats) {
	g, k := gauge, counter
	e.one("shardgate_buffer_statements_buffered_total", "Statements a cutover held at their table's gate.", k, float64(b.Buffered))
	e.one("shardgate_buffer_statements_drained_total", "Held statements that ran once the cutover let them go.", k, float64(b.Drained))
	for _, r := range EvictReasons {
		e.one("shardgate_buffer_statements_evicted_total", "Held statements failed with 1205, by reason (buffer_full: buffer_size reached; window_exceeded: held past buffer_window).", k, float64(b.Evicted[r]), "reason", r)
	}
	e.one("shardgate_buffer_statements", "Statements held now.", g, float64(b.Held))
	e.one("shardgate_buffer_pauses_total", "Times this proxy held a table for a cutover (its own, or one of its fleet's).", k, float64(b.Pauses))
	e.one("shardgate_buffer_last_pause_seconds", "Length of the last hold of a table for a cutover.", g, b.LastPauseSeconds)
	e.one("shardgate_buffer_pause_seconds_sum", "Time tables were held for cutovers, summed.", k, b.PauseSecondsSum)
	e.one("shardgate_cutover_acks_missing_total", "Live proxies that had not acknowledged a cutover of this proxy when it stopped waiting (cutover_ack_wait).", k, float64(b.AcksMissing))
}
