package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// archiveStopTimeout bounds the stop of the broker that writes the class archive.
const archiveStopTimeout = 5 * time.Minute

// classArchiveName is the file, beside the jars' directory, that holds the JVM's class archive of a broker.
const classArchiveName = "kafka.jsa"

// bootstrapTemplateName is the file, beside the jars' directory, that keeps the bootstrap.checkpoint the
// storage tool wrote for the broker that wrote the class archive (see Broker.format).
const bootstrapTemplateName = "kafka-bootstrap.checkpoint"

// bootstrapTemplate returns where the bootstrap.checkpoint kept for the jars in lib lives.
func bootstrapTemplate(lib string) string {
	return filepath.Join(filepath.Dir(lib), bootstrapTemplateName)
}

// ClassArchive returns where the class archive of the jars in lib lives (see WriteClassArchive).
func ClassArchive(lib string) string { return filepath.Join(filepath.Dir(lib), classArchiveName) }

// WriteClassArchive runs a broker once in a temporary directory, with a transactional producer and a
// read_committed group consumer, and stops it, so that the JVM writes the classes it loaded (parsed and verified)
// into a dynamic CDS archive (-XX:ArchiveClassesAtExit) beside the jars. Brokers started afterwards map that
// archive instead of loading the classes from the jars: on a small machine a broker starts with about a third
// less CPU (2.8 against 1.8 CPU seconds to "Kafka Server started" on this project's machines). A JVM that
// finds the archive stale (another JDK, other jars) ignores it. It also keeps the bootstrap.checkpoint the
// storage tool wrote, which later brokers copy instead of running the tool (see Broker.format). scripts/deps.sh
// kafka calls this through kafkabroker -class-archive after fetching the jars.
func WriteClassArchive() error {
	lib, _, err := Lib()
	if err != nil {
		return err
	}
	dst := ClassArchive(lib)
	tmp := dst + ".tmp" + strconv.Itoa(os.Getpid())
	dir, err := os.MkdirTemp("", "kafkatest-cds-")
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	defer os.RemoveAll(dir)
	defer os.Remove(tmp) // left only by a failure: a JVM killed while writing leaves part of an archive
	b, err := New(dir, Options{archiveAtExit: tmp})
	if err != nil {
		return err
	}
	defer b.Close()
	if err := exercise(b); err != nil {
		return fmt.Errorf("%w%s", err, b.LogTail(logTailLines))
	}
	// The JVM writes the archive on its way out, which takes long on a busy machine.
	b.mu.Lock()
	err = b.stopLocked(syscall.SIGTERM, archiveStopTimeout)
	b.mu.Unlock()
	if err != nil {
		return err
	}
	if !isFile(tmp) {
		return fmt.Errorf("kafkatest: the broker's JVM wrote no class archive to %s%s", tmp, b.LogTail(logTailLines))
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	checkpoint, err := os.ReadFile(filepath.Join(b.DataDir, "bootstrap.checkpoint"))
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	tmpl := bootstrapTemplate(lib)
	if err := os.WriteFile(tmpl+".tmp", checkpoint, 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.Rename(tmpl+".tmp", tmpl); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	return nil
}

// exercise creates a topic, commits a transaction into it and reads it back in a group, so that the classes
// of those paths are loaded when the archive is written.
func exercise(b *Broker) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "warm-up"
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.TransactionalID("warm-up"), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, topic); err != nil || resp.Err != nil {
		return fmt.Errorf("kafkatest: warm-up topic: %w", errors.Join(err, resp.Err))
	}
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	for i := range 30 {
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i % 7)), Value: []byte("x")}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return err
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("warm-up"), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cons.Close()
	for got := 0; got < 30; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("kafkatest: warm-up: read %d of 30 records: %w", got, err)
		}
		if err := fs.Err(); err != nil {
			return fmt.Errorf("kafkatest: warm-up: %w", err)
		}
		got += fs.NumRecords()
	}
	return cons.CommitUncommittedOffsets(ctx)
}
