package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestDrain: a shutdown with drain_delay first answers 503 on /healthz
// while still accepting clients, then closes the listeners; sessions end
// between statements, and a session inside a transaction finishes it
// first. Clients that run transactions through the whole shutdown see no
// failure inside a transaction: each one either committed or was never
// begun (the connection closed between two of them).
func TestDrain(t *testing.T) {
	servers := backends(t)
	cfg := newConfig(t, servers[0])
	cfg.DrainDelay = 400 * time.Millisecond
	cfg.Nodes[0].MaxConnsLimit = 16
	p := startProxy(t, cfg)
	db := openDB(t, p.dsn("", ""))
	mustExec(t, db, "CREATE DATABASE IF NOT EXISTS drain", "DROP TABLE IF EXISTS drain.t", "CREATE TABLE drain.t (id INT PRIMARY KEY)")

	var mu sync.Mutex
	committed, failedInTxn, endedBetween := 0, []string{}, 0
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Go(func() {
			c, err := db.Conn(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			ctx := context.Background()
			for i := 0; ; i++ {
				if _, err := c.ExecContext(ctx, "BEGIN"); err != nil {
					mu.Lock()
					endedBetween++
					mu.Unlock()
					return // closed between transactions: the drain's way
				}
				_, err := c.ExecContext(ctx, fmt.Sprintf("INSERT INTO drain.t VALUES (%d)", w*1_000_000+i))
				time.Sleep(20 * time.Millisecond) // inside the transaction
				if err == nil {
					_, err = c.ExecContext(ctx, "COMMIT")
				}
				mu.Lock()
				if err != nil {
					failedInTxn = append(failedInTxn, err.Error())
				} else {
					committed++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)

	done := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- p.srv.Shutdown(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	rec := httptest.NewRecorder()
	p.srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/healthz during the drain: %d, want 503", rec.Code)
	}
	late := openDB(t, p.dsn("", ""))
	if err := late.Ping(); err != nil {
		t.Errorf("a client connecting during drain_delay was refused: %v", err)
	}
	late.Close()
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	took := time.Since(start)
	wg.Wait()
	var rows int
	if err := openDB(t, directDSN(servers[0], "", "")).QueryRow("SELECT COUNT(*) FROM drain.t").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("shutdown took %v; %d transactions committed, %d failed inside a transaction, %d sessions closed between transactions; %d rows",
		took.Round(time.Millisecond), committed, len(failedInTxn), endedBetween, rows)
	if len(failedInTxn) > 0 {
		t.Errorf("transactions failed during the drain: %q", failedInTxn)
	}
	if endedBetween != 4 {
		t.Errorf("%d of 4 sessions were closed between transactions", endedBetween)
	}
	if rows != committed {
		t.Errorf("%d rows for %d commits", rows, committed)
	}
	if took < cfg.DrainDelay {
		t.Errorf("shutdown took %v, less than drain_delay %v", took, cfg.DrainDelay)
	}
}
