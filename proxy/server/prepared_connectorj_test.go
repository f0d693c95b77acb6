package server_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// connectorJ returns the MariaDB Connector/J jar in the local Maven
// repository (mvn dependency:get
// -Dartifact=org.mariadb.jdbc:mariadb-java-client:3.5.6), skipping the
// test when it or java is missing.
func connectorJ(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skip("java is not installed")
	}
	home, _ := os.UserHomeDir()
	jars, _ := filepath.Glob(filepath.Join(home, ".m2/repository/org/mariadb/jdbc/mariadb-java-client/3.*/mariadb-java-client-3.*.jar"))
	if len(jars) == 0 {
		t.Skip("MariaDB Connector/J is not in the local Maven repository (mvn dependency:get -Dartifact=org.mariadb.jdbc:mariadb-java-client:3.5.6)")
	}
	return jars[len(jars)-1]
}

// TestConnectorJBulk: MariaDB Connector/J with useBulkStmts sends its
// batches as COM_STMT_BULK_EXECUTE (the proxy announces it, and takes the
// statement id -1 the driver pipelines after its prepare): a batch of
// inserts of a sharded table lands on the shards, a batch with a
// duplicate fails whole with 1062, a batch of updates spreads over the
// shards; the driver reports what it reports directly against MariaDB
// (the same program on an unsharded copy of the table).
func TestConnectorJBulk(t *testing.T) {
	jar := connectorJ(t)
	p := budgetProxy(t, nil)
	s := backends(t)[0]
	direct := openDB(t, directDSN(s, "", ""))
	mustExec(t, direct, "DROP DATABASE IF EXISTS bulkj", "CREATE DATABASE bulkj",
		"CREATE TABLE bulkj.acct (id INT PRIMARY KEY, balance INT NOT NULL)")
	t.Cleanup(func() { direct.Exec("DROP DATABASE IF EXISTS bulkj") })
	run := func(addr, db, user, password string) string {
		url := "jdbc:mariadb://" + addr + "/" + db + "?user=" + user + "&password=" + password + "&useBulkStmts=true&useServerPrepStmts=true"
		cmd := exec.Command("java", "-cp", jar, "testdata/connectorj/Bulk.java", url)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("java: %v\n%s%s", err, out, stderr.String())
		}
		return strings.TrimSpace(string(out))
	}
	want := run(s.Addr, "bulkj", s.User, s.Password)
	got := run(p.addr, "txn_t", appUser, appPassword)
	t.Logf("Connector/J through the proxy:\n%s", got)
	if got != want {
		t.Errorf("Connector/J through the proxy:\n%s\ndirectly:\n%s", got, want)
	}
	if !strings.Contains(got, "update [-2, -2, -2, -2]") {
		t.Errorf("the update batch did not run as a bulk (-2 per row): %s", got)
	}
}
