package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/shardgate/shardgate/config"
	"github.com/shardgate/shardgate/internal/mariadbtest"
	"github.com/shardgate/shardgate/proxy/server"
)

// benchReplicaProxy serves a proxy over master and replica with the given
// read_consistency until b ends; it returns a client handle with one
// connection (the text protocol: parameters are interpolated).
func benchReplicaProxy(b *testing.B, master, replica *mariadbtest.Server, consistency string, healthInterval time.Duration) *sql.DB {
	b.Helper()
	cfg := config.Default()
	cfg.Addr = "127.0.0.1:0"
	cfg.Users = []config.User{{User: appUser, Password: appPassword}}
	cfg.Nodes = []config.Node{{Name: "node1", Master: master.Addr, User: master.User, Password: master.Password,
		Slave: replica.Addr + "@1", MaxConnsLimit: 8, DownAfterNoalive: 1}}
	cfg.Schemas = []config.Schema{{User: appUser, Nodes: []string{"node1"}, Default: "node1", ReadConsistency: consistency}}
	cfg.Backend.HealthInterval = healthInterval
	cfg.Backend.MaxReplicaLag = 30 * time.Second
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(cfg, server.Options{Log: zap.NewNop()})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st := srv.Stats(); len(st.Nodes) == 1 && len(st.Nodes[0].Replicas) == 1 && st.Nodes[0].Replicas[0].Usable {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the replica did not become usable")
		}
		time.Sleep(20 * time.Millisecond)
	}
	db, err := sql.Open("mysql", userDSN(appUser, appPassword, l.Addr().String(), "cb", "interpolateParams=true"))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	return db
}

// selects reads a server's Com_select counter.
func selects(b *testing.B, db *sql.DB) int {
	var name string
	var n int
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_select'").Scan(&name, &n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkCausalRead: the cost per read of read_consistency universal
// against session and strong: one client sends point selects (text
// protocol, 10 000 rows) through a proxy in this process over a master
// and one replica on loopback. idle: nothing writes, so under universal
// the replica's last health check already covers the master's position
// and only the position read is added; idle/universal-wait: the proxy's
// health check (every 10 minutes) last saw the replica before the
// master's last write, so each read also runs MASTER_GTID_WAIT, which
// returns at once (the replica has the write): the full path's round
// trips without replication delay; writes: 200 updates a second straight
// to the master move the position between reads, so each universal read
// waits on the replica for replication too. The SELECTs each server ran
// per read are reported (master/op, replica/op): the extra round trips.
// allocs/op counts the client's and the in-process proxy's. Run it in
// separate processes (-count 1) several times: within one process -count
// repeats each case back to back, not interleaved.
func BenchmarkCausalRead(b *testing.B) {
	if cluster == nil {
		b.Skip("integration benchmark: needs MariaDB")
	}
	master, replica := masterAndReplica(b)
	mdb, err := sql.Open("mysql", directDSN(master, "", ""))
	if err != nil {
		b.Fatal(err)
	}
	defer mdb.Close()
	rdb, err := sql.Open("mysql", directDSN(replica, "", ""))
	if err != nil {
		b.Fatal(err)
	}
	defer rdb.Close()
	const rows = 10000
	for _, q := range []string{"CREATE DATABASE cb", "CREATE TABLE cb.t (id INT PRIMARY KEY, c CHAR(120))",
		"CREATE TABLE cb.w (id INT PRIMARY KEY, n INT)", "INSERT INTO cb.w VALUES (1, 0)",
		fmt.Sprintf("INSERT INTO cb.t SELECT seq, REPEAT('x', 120) FROM cb.seq_1_to_%d", rows)} {
		if _, err := mdb.Exec(q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	var pos string
	if err := mdb.QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		b.Fatal(err)
	}
	if _, err := rdb.Exec("SELECT MASTER_GTID_WAIT(?, 30)", pos); err != nil {
		b.Fatal(err)
	}
	modes := []string{config.ConsistencyStrong, config.ConsistencySession, config.ConsistencyUniversal}
	clients := map[string]*sql.DB{}
	for _, m := range modes {
		clients[m] = benchReplicaProxy(b, master, replica, m, 100*time.Millisecond)
	}
	const waits = "universal-wait"
	clients[waits] = benchReplicaProxy(b, master, replica, config.ConsistencyUniversal, 10*time.Minute)
	// After its first check: every read of it waits for this write.
	if _, err := mdb.Exec("UPDATE cb.w SET n = n + 1 WHERE id = 1"); err != nil {
		b.Fatal(err)
	}
	for _, load := range []string{"idle", "writes"} {
		cases := modes
		if load == "idle" {
			cases = append(cases, waits)
		}
		for _, m := range cases {
			b.Run(load+"/"+m, func(b *testing.B) {
				db := clients[m]
				var c string
				for i := 0; i < 100; i++ { // warm the pools
					if err := db.QueryRow("SELECT c FROM t WHERE id = ?", 1+i).Scan(&c); err != nil {
						b.Fatal(err)
					}
				}
				if load == "writes" {
					ctx, cancel := context.WithCancel(context.Background())
					stopped := make(chan struct{})
					go func() {
						defer close(stopped)
						tick := time.NewTicker(5 * time.Millisecond)
						defer tick.Stop()
						for {
							select {
							case <-ctx.Done():
								return
							case <-tick.C:
								mdb.ExecContext(ctx, "UPDATE cb.w SET n = n + 1 WHERE id = 1")
							}
						}
					}()
					defer func() { cancel(); <-stopped }()
				}
				m0, r0 := selects(b, mdb), selects(b, rdb)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := db.QueryRow("SELECT c FROM t WHERE id = ?", 1+(i*7919)%rows).Scan(&c); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.StopTimer()
				mN, rN := selects(b, mdb)-m0, selects(b, rdb)-r0
				b.ReportMetric(float64(mN)/float64(i), "master/op")
				b.ReportMetric(float64(rN)/float64(i), "replica/op")
			})
		}
	}
}
