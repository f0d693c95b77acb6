package digest_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/shardgate/shardgate/digest"
)

func key(user, schema, fp string) []byte { return digest.Key(nil, user, schema, []byte(fp)) }

// TestCounts: N shapes with known counts, recorded from 8 goroutines at
// once, give N rows with exactly those counts, times, rows and errors.
func TestCounts(t *testing.T) {
	d := digest.New(1024)
	const shapes = 50
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < shapes; i++ {
				for n := 0; n <= i; n++ { // shape i runs i+1 times per goroutine
					d.Record(key("app", "db", fmt.Sprintf("select * from t%d where id = ?", i)), "single", time.Duration(i+1)*time.Millisecond, 2, n == 0, time.Now())
				}
			}
		}()
	}
	wg.Wait()
	rows := d.Snapshot()
	if len(rows) != shapes {
		t.Fatalf("%d rows, want %d", len(rows), shapes)
	}
	for _, r := range rows {
		var i int
		fmt.Sscanf(r.Fingerprint, "select * from t%d where id = ?", &i)
		want := uint64(8 * (i + 1))
		if r.Count != want || r.Errors != 8 || r.Rows != 2*want || r.User != "app" || r.Schema != "db" || r.Route != "single" {
			t.Errorf("%s: %+v, want count %d", r.Fingerprint, r, want)
		}
		if d := time.Duration(i+1) * time.Millisecond; r.Min != d || r.Max != d || r.Total != time.Duration(want)*d || r.P99 != d {
			t.Errorf("%s: min %v max %v total %v p99 %v, want %v each", r.Fingerprint, r.Min, r.Max, r.Total, r.P99, d)
		}
	}
	if rows[0].Fingerprint != fmt.Sprintf("select * from t%d where id = ?", shapes-1) {
		t.Errorf("first row %s: the most total time comes first", rows[0].Fingerprint)
	}
	d.Reset()
	if d.Len() != 0 {
		t.Fatalf("%d shapes after Reset", d.Len())
	}
}

// TestP99: 990 fast executions and 10 slow ones: the 99th percentile is
// among the fast.
func TestP99(t *testing.T) {
	d := digest.New(16)
	k := key("u", "s", "select ?")
	for i := 0; i < 990; i++ {
		d.Record(k, "single", 100*time.Microsecond, 0, false, time.Now())
	}
	for i := 0; i < 10; i++ {
		d.Record(k, "single", time.Second, 0, false, time.Now())
	}
	r := d.Snapshot()[0]
	if r.P99 < 100*time.Microsecond || r.P99 > 256*time.Microsecond || r.Max != time.Second {
		t.Fatalf("p99 %v max %v; want p99 within the bucket of 100µs", r.P99, r.Max)
	}
}

// TestBoundedEviction: 1 000 000 distinct shapes through a digest of 4 096
// keep it at 4 096 shapes and its memory bounded, and the shapes that ran
// often are still there with their counts (at most overcount too high).
func TestBoundedEviction(t *testing.T) {
	d := digest.New(4096)
	hot := []string{"select hot one", "update hot two", "insert hot three"}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var buf []byte
	for i := 0; i < 1_000_000; i++ {
		buf = digest.Key(buf[:0], "app", "db", fmt.Appendf(nil, "select c%d from t", i))
		d.Record(buf, "scatter", time.Microsecond, 1, false, time.Now())
		if i%100 == 0 {
			for _, h := range hot {
				d.Record(key("app", "db", h), "single", time.Microsecond, 1, false, time.Now())
			}
		}
	}
	if n := d.Len(); n > d.Capacity() {
		t.Fatalf("%d shapes held, capacity %d", n, d.Capacity())
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grew > 8<<20 {
		t.Fatalf("the heap grew by %d bytes for %d shapes", grew, d.Len())
	}
	found := 0
	for _, r := range d.Snapshot() {
		for _, h := range hot {
			if r.Fingerprint == h {
				found++
				if r.Count-r.Overcount > 10000 || r.Count < 10000 {
					t.Errorf("%s: count %d overcount %d, want 10000 within the overcount", h, r.Count, r.Overcount)
				}
			}
		}
	}
	if found != len(hot) {
		t.Fatalf("%d of %d hot shapes survived the eviction", found, len(hot))
	}
	t.Logf("1 000 000 shapes: %d held, heap +%d KiB", d.Len(), grew>>10)
}

func BenchmarkRecord(b *testing.B) {
	d := digest.New(4096)
	k := key("app", "sbtest", "select c from sbtest1 where id = ?")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d.Record(k, "single", time.Microsecond, 1, false, time.Now())
	}
}
