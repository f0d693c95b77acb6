package server_test

import (
	"bytes"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/shardgate/shardgate/mysql"
)

// serverPacket sets the backend's max_allowed_packet for the test (the
// connections opened afterwards take it) and puts it back.
func serverPacket(t *testing.T, direct *sql.DB, size int) {
	t.Helper()
	old := queryValue(t, direct, "SELECT @@GLOBAL.max_allowed_packet")
	mustExec(t, direct, fmt.Sprintf("SET GLOBAL max_allowed_packet = %d", size))
	t.Cleanup(func() { direct.Exec("SET GLOBAL max_allowed_packet = " + old) })
}

// textOverhead is the length of the COM_QUERY payload of
// SELECT LENGTH('v'), MD5('v') minus twice the value's length.
var textOverhead = len("\x03SELECT LENGTH(''), MD5('')")

// seqWarnings counts go-sql-driver's log lines about packet sequence
// numbers ("unexpected sequence nr").
type seqWarnings struct {
	mu sync.Mutex
	n  int
	t  *testing.T
}

func (w *seqWarnings) Print(v ...any) {
	line := fmt.Sprint(v...)
	if strings.Contains(line, "sequence") {
		w.mu.Lock()
		w.n++
		w.mu.Unlock()
	}
	w.t.Log("driver: ", line)
}

func (w *seqWarnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// openLogged is openDB with the driver's log going to w.
func openLogged(t *testing.T, dsn string, w *seqWarnings) *sql.DB {
	t.Helper()
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = w
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return db
}

// largeMode is how the driver sends a value: its maxAllowedPacket decides
// (inline below maxAllowedPacket / 3 for two parameters, as long data
// above, in chunks of maxAllowedPacket), and interpolateParams makes a
// text query.
type largeMode struct {
	name   string
	params string
	sizes  map[string]int
}

// largeValue is a value of n bytes and the LENGTH and MD5 of it.
func largeValue(n int) ([]byte, string) {
	v := bytes.Repeat([]byte{'a' + byte(n%26)}, n)
	v[n/2] = 'z'
	sum := md5.Sum(v)
	return v, fmt.Sprintf("%d %s", n, hex.EncodeToString(sum[:]))
}

// TestLargePackets (issue 32): values near the 16 MiB physical packet and
// near max_allowed_packet (16 MiB, MariaDB's default, and 64 MiB on the
// server and the proxy), in one command (a text query, an execution with
// the values inline) or as long data (COM_STMT_SEND_LONG_DATA, in chunks
// or in one packet), with and without compression, get the answers
// MariaDB gives directly (where MariaDB answers them), and the driver
// sees no packet out of sequence;
// so do rows past 16 MiB. Commands whose physical packets are exactly
// full are followed by an empty one.
func TestLargePackets(t *testing.T) {
	F := mysql.MaxPacketPayload
	t.Run("max_allowed_packet 16 MiB", func(t *testing.T) {
		const M = 16 << 20
		testLargePackets(t, M, []largeMode{
			{"text", "interpolateParams=true&maxAllowedPacket=16777216", map[string]int{
				"a text query of exactly max_allowed_packet": (M - textOverhead) / 2,
			}},
			{"long data in 1 MiB chunks", "maxAllowedPacket=1048576", map[string]int{
				"max_allowed_packet - 100 per parameter":   M - 100,
				"max_allowed_packet - 7 per parameter":     M - 7,
				"exactly max_allowed_packet per parameter": M,
			}},
			{"long data in one packet", "maxAllowedPacket=16777216", map[string]int{
				"a long data packet of max_allowed_packet - 1": M - 8,
			}},
		})
	})
	t.Run("max_allowed_packet 64 MiB", func(t *testing.T) {
		testLargePackets(t, 64<<20, []largeMode{
			{"text", "interpolateParams=true&maxAllowedPacket=67108864", map[string]int{
				"16 MiB - 1":                         F,
				"a text query of exactly 16 MiB - 1": (F - textOverhead) / 2,
				"a text query of exactly 32 MiB - 2": (2*F - textOverhead) / 2,
			}},
			{"prepared inline", "maxAllowedPacket=67108864", map[string]int{
				"16 MiB - 1":    F,
				"16 MiB + 1000": F + 1 + 1000,
			}},
			{"long data in 1 MiB chunks", "maxAllowedPacket=1048576", map[string]int{
				"long data of exactly 16 MiB - 1": F - 7,
				"16 MiB + 1000":                   F + 1 + 1000,
			}},
			{"long data in one packet", "maxAllowedPacket=25165824", map[string]int{
				"16 MiB - 1": F,
				"30 MiB":     30 << 20,
			}},
		})
	})
}

func testLargePackets(t *testing.T, maxPacket int, modes []largeMode) {
	s := backends(t)[0]
	serverPacket(t, openDB(t, directDSN(s, "", "")), maxPacket)
	cfg := newConfig(t, s)
	cfg.MaxAllowedPacket = maxPacket
	p := startProxy(t, cfg)
	for _, compress := range []bool{false, true} {
		for _, m := range modes {
			params := m.params
			if compress {
				params += "&compress=true"
			}
			t.Run(fmt.Sprintf("%s, compress=%v", m.name, compress), func(t *testing.T) {
				w := &seqWarnings{t: t}
				direct := openDB(t, directDSN(s, "", params))
				proxied := openLogged(t, p.dsn("", params), w)
				for what, n := range m.sizes {
					v, want := largeValue(n)
					var length int
					var md string
					if err := direct.QueryRow("SELECT LENGTH(?), MD5(?)", v, v).Scan(&length, &md); err != nil {
						// Not something MariaDB does (the driver cannot
						// send a long data packet of max_allowed_packet
						// compressed): nothing to compare.
						t.Logf("%s (%d bytes) directly: %v", what, n, err)
						continue
					}
					err := proxied.QueryRow("SELECT LENGTH(?), MD5(?)", v, v).Scan(&length, &md)
					if got := fmt.Sprintf("%d %s", length, md); err != nil || got != want {
						t.Errorf("%s (%d bytes) through the proxy: got %s, %v; want %s", what, n, got, err, want)
					}
				}
				// Rows of exactly 16 MiB - 1 (the row packet of
				// REPEAT(x, n) is n + 4 bytes) and past 16 MiB come back
				// whole.
				for _, n := range []int{mysql.MaxPacketPayload - 4, mysql.MaxPacketPayload - 3, 20 << 20} {
					if n+4 > maxPacket {
						continue
					}
					var got []byte
					if err := proxied.QueryRow("SELECT REPEAT('r', ?)", n).Scan(&got); err != nil || len(got) != n || bytes.Count(got, []byte("r")) != n {
						t.Errorf("a row of %d bytes: %d bytes, %v", n, len(got), err)
					}
				}
				if n := w.count(); n > 0 {
					t.Errorf("the driver logged %d packets out of sequence through the proxy", n)
				}
			})
		}
	}
}
