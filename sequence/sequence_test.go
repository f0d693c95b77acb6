package sequence_test

import (
	"database/sql"
	"errors"
	"slices"
	"sync"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/backend"
	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/mysql"
	"github.com/shardgate/shardgate/sequence"
)

var cluster *mariadbtest.Cluster

func TestMain(m *testing.M) {
	mariadbtest.Main(m, 1, func(c *mariadbtest.Cluster) int {
		cluster = c
		return m.Run()
	})
}

// node returns a backend node for the test server; each call is a new
// node, as each proxy process has its own.
func node(t *testing.T) *backend.Node {
	t.Helper()
	if cluster == nil {
		t.Skip("integration test: needs MariaDB (skipped under -short)")
	}
	s := cluster.Servers[0]
	n := backend.NewNode(config.Node{Name: "node1", Master: s.Addr, User: s.User, Password: s.Password, MaxConnsLimit: 4, DownAfterNoalive: 1},
		config.Default().Backend, nil)
	n.Start()
	t.Cleanup(n.Close)
	return n
}

func db(t *testing.T) *sql.DB {
	t.Helper()
	d, err := sql.Open("mysql", cluster.Servers[0].DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestTwoProxiesNeverShare: two sidecars (two proxies) on one database,
// eight goroutines each, small blocks: every value is handed out once,
// and each proxy's values increase in the order it handed them out.
func TestTwoProxiesNeverShare(t *testing.T) {
	const sidecarDB = "seq_t_share"
	db(t).Exec("DROP DATABASE IF EXISTS " + sidecarDB)
	var (
		mu   sync.Mutex
		all  = map[uint64]int{}
		wg   sync.WaitGroup
		errs = make(chan error, 16)
	)
	for p := range 2 {
		sc := sequence.NewSidecar(node(t), sidecarDB)
		t.Cleanup(sc.Close)
		set := sequence.NewSet(sc)
		set.Add("d", "t", 7, func() (uint64, error) { return 100, nil })
		var order []uint64 // this proxy's values, in the order handed out
		var pmu sync.Mutex
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					ids := make([]uint64, 1+i%3)
					pmu.Lock()
					err := set.NextIDs("d", "t", ids)
					order = append(order, ids...)
					pmu.Unlock()
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for _, id := range ids {
						all[id]++
					}
					mu.Unlock()
				}
			}()
		}
		t.Cleanup(func() {
			if !slices.IsSorted(order) {
				t.Errorf("proxy %d handed out values out of order", p)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for id, n := range all {
		if n != 1 {
			t.Errorf("value %d handed out %d times", id, n)
		}
		if id < 100 {
			t.Errorf("value %d below the start", id)
		}
	}
	// Each goroutine asks 50 times for 1, 2 or 3 values: 99 in all.
	if len(all) != 2*8*99 {
		t.Errorf("%d distinct values, want %d", len(all), 2*8*99)
	}
}

// TestRestartSkipsBlock: a new proxy on the same sidecar never hands out a
// value of the block an earlier one held, used or not.
func TestRestartSkipsBlock(t *testing.T) {
	const sidecarDB = "seq_t_restart"
	db(t).Exec("DROP DATABASE IF EXISTS " + sidecarDB)
	first := func() []uint64 {
		sc := sequence.NewSidecar(node(t), sidecarDB)
		defer sc.Close()
		set := sequence.NewSet(sc)
		set.Add("d", "t", 1000, func() (uint64, error) { return 42, nil })
		ids := make([]uint64, 3)
		if err := set.NextIDs("d", "t", ids); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	a := first()
	b := first()
	if !slices.Equal(a, []uint64{42, 43, 44}) || b[0] != 1042 {
		t.Errorf("first proxy %v, restarted %v; want 42.. then 1042..", a, b)
	}
}

// TestNewerSidecarRefused: a sidecar written by a newer proxy (a higher
// schema version) is not touched.
func TestNewerSidecarRefused(t *testing.T) {
	const sidecarDB = "seq_t_newer"
	d := db(t)
	d.Exec("DROP DATABASE IF EXISTS " + sidecarDB)
	for _, q := range []string{"CREATE DATABASE " + sidecarDB,
		"CREATE TABLE " + sidecarDB + ".sidecar_version (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, version INT UNSIGNED NOT NULL)",
		"INSERT INTO " + sidecarDB + ".sidecar_version VALUES (1, 99)"} {
		if _, err := d.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	sc := sequence.NewSidecar(node(t), sidecarDB)
	defer sc.Close()
	set := sequence.NewSet(sc)
	set.Add("d", "t", 10, func() (uint64, error) { return 1, nil })
	err := set.NextIDs("d", "t", make([]uint64, 1))
	var se *mysql.SQLError
	if !errors.As(err, &se) || se.Code != mysql.ErAutoincReadFailed {
		t.Fatalf("newer sidecar: %v", err)
	}
	t.Log(err)
}

// TestStartFailure: a sequence whose first value cannot be found fails
// its statement with 1467, and works once it can.
func TestStartFailure(t *testing.T) {
	const sidecarDB = "seq_t_start"
	db(t).Exec("DROP DATABASE IF EXISTS " + sidecarDB)
	sc := sequence.NewSidecar(node(t), sidecarDB)
	defer sc.Close()
	set := sequence.NewSet(sc)
	fail := true
	set.Add("d", "t", 10, func() (uint64, error) {
		if fail {
			return 0, errors.New("node2 is down")
		}
		return 5, nil
	})
	ids := make([]uint64, 2)
	if err := set.NextIDs("d", "t", ids); err == nil {
		t.Fatal("no error")
	}
	fail = false
	if err := set.NextIDs("d", "t", ids); err != nil || ids[0] != 5 || ids[1] != 6 {
		t.Fatalf("%v %v", ids, err)
	}
}

// TestAdoptsOldSidecar: a sidecar written before sidecar_migrations (its
// tables created by the sequence code itself) is adopted: the sequence
// goes on from the value stored, and the version is recorded.
func TestAdoptsOldSidecar(t *testing.T) {
	const sidecarDB = "seq_t_adopt"
	d := db(t)
	d.Exec("DROP DATABASE IF EXISTS " + sidecarDB)
	for _, q := range []string{"CREATE DATABASE " + sidecarDB,
		"CREATE TABLE " + sidecarDB + ".sidecar_version (id TINYINT UNSIGNED NOT NULL PRIMARY KEY, version INT UNSIGNED NOT NULL) ENGINE=InnoDB",
		"INSERT INTO " + sidecarDB + ".sidecar_version VALUES (1, 1)",
		"CREATE TABLE " + sidecarDB + ".sequences (name VARCHAR(192) NOT NULL PRIMARY KEY, next_id BIGINT UNSIGNED NOT NULL, " +
			"updated TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP) ENGINE=InnoDB",
		"INSERT INTO " + sidecarDB + ".sequences (name, next_id) VALUES ('d.t', 5000)"} {
		if _, err := d.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	sc := sequence.NewSidecar(node(t), sidecarDB)
	defer sc.Close()
	set := sequence.NewSet(sc)
	set.Add("d", "t", 10, func() (uint64, error) { return 1, nil })
	ids := make([]uint64, 2)
	if err := set.NextIDs("d", "t", ids); err != nil || ids[0] != 5000 || ids[1] != 5001 {
		t.Fatalf("%v %v; want 5000 5001", ids, err)
	}
	var v int
	if err := d.QueryRow("SELECT version FROM " + sidecarDB + ".sidecar_migrations WHERE component = 'sequence'").Scan(&v); err != nil || v != 1 {
		t.Fatalf("version %d %v; want 1", v, err)
	}
}
