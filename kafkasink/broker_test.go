package kafkasink

import "testing"

// broker returns the bootstrap addresses of a broker for one test.
func broker(t *testing.T) []string { return fake(t) }
