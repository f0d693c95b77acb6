package kafkasink

import (
	"os"
	"sync"
	"testing"

	"github.com/shardgate/shardgate/internal/kafkatest"
)

// The integration tests share one real Kafka broker (KRaft, single node),
// started by the first test that asks and closed by TestMain; each test
// uses topics and a transactional id of its own.
var shared struct {
	once   sync.Once
	dir    string
	broker *kafkatest.Broker
	err    error
}

// broker returns the shared broker's bootstrap addresses, starting it on
// first use; the test fails loudly if it cannot start.
func broker(t *testing.T) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Kafka (skipped under -short)")
	}
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "kafkasink-broker-")
		if shared.err == nil {
			shared.broker, shared.err = kafkatest.New(shared.dir, kafkatest.Options{})
		}
	})
	if shared.err != nil {
		t.Fatalf("%v\n*** run scripts/deps.sh kafka, or go test -short to skip", shared.err)
	}
	return shared.broker.Addrs()
}

// closeBroker stops the shared broker, if one started.
func closeBroker() {
	if shared.broker != nil {
		shared.broker.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
}
