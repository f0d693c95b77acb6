// The client matrix's Java client: MariaDB Connector/J (Debian's libmariadb-java) over JDBC.
//
// clients/clients_test.go compiles this file once with javac and runs it with java, once against MariaDB
// directly and once through the proxy, and compares what it prints. The environment says where and what:
//
//   CM_HOST, CM_PORT, CM_USER, CM_PASSWORD, CM_DB  the server and database
//   CM_TABLES     comma-separated tables to run every case on (all have the same columns)
//   CM_VARIANTS   comma-separated variant=base pairs; a variant is connectorj-serverps (useServerPrepStmts=true:
//                 COM_STMT_PREPARE and the binary protocol) or connectorj-clientps (the driver interpolates), and
//                 base is the first id of its own range, so that variants never touch each other's rows
//
// Each case prints one JSON line {client, case, table, ok, error, observed}. A case checks its own expectations
// and fails with the exception it met; observed is what the client saw that must be the same through the proxy
// as directly (result-set and database metadata). Exit status 3 means the driver is missing.

import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.sql.Types;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public class Matrix {
    static final Timestamp WHEN = Timestamp.valueOf("2024-01-02 03:04:05");
    static final String COLS = "id, name, qty, price, flag, created, note";

    interface Case {
        String run(String table, long base) throws Exception;
    }

    final String url;
    final String props;

    Matrix(String url, String props) {
        this.url = url;
        this.props = props;
    }

    Connection connect(String extra) throws SQLException {
        return DriverManager.getConnection(url + "?" + props + extra);
    }

    Connection connect() throws SQLException {
        return connect("");
    }

    static void check(boolean cond, String what) {
        if (!cond) {
            throw new AssertionError(what);
        }
    }

    // bind sets the seven columns of one row, id first; a null id leaves it out.
    static void bind(PreparedStatement ps, Long id, String name, int qty) throws SQLException {
        int i = 1;
        if (id != null) {
            ps.setLong(i++, id);
        }
        ps.setString(i++, name);
        ps.setInt(i++, qty);
        ps.setBigDecimal(i++, new BigDecimal("12.50"));
        ps.setBoolean(i++, true);
        ps.setTimestamp(i++, WHEN);
        ps.setNull(i, Types.VARCHAR);
    }

    static String insertSQL(String table) {
        return "INSERT INTO " + table + " (" + COLS + ") VALUES (?, ?, ?, ?, ?, ?, ?)";
    }

    long count(String table, long lo, long hi) throws SQLException {
        try (Connection c = connect();
                PreparedStatement ps = c.prepareStatement("SELECT COUNT(*) FROM " + table + " WHERE id BETWEEN ? AND ?")) {
            ps.setLong(1, lo);
            ps.setLong(2, hi);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    String crud(String table, long base) throws Exception {
        long id = base + 1;
        String observed;
        try (Connection c = connect()) {
            try (PreparedStatement ps = c.prepareStatement(insertSQL(table))) {
                bind(ps, id, "alpha", 1);
                check(ps.executeUpdate() == 1, "INSERT did not report 1 row");
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT " + COLS + " FROM " + table + " WHERE id = ?")) {
                ps.setLong(1, id);
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next(), "row " + id + " not found after insert");
                    List<String> got = new ArrayList<>();
                    for (int i = 1; i <= 7; i++) {
                        Object v = rs.getObject(i);
                        got.add(v == null ? "null" : v.getClass().getSimpleName() + ":" + v);
                    }
                    observed = String.join(" ", got);
                    String want = "Long:" + id + " String:alpha Integer:1 BigDecimal:12.50 Boolean:true "
                            + "Timestamp:2024-01-02 03:04:05.0 null";
                    check(observed.equals(want), "read back " + observed + ", want " + want);
                    check(!rs.next(), "more than one row");
                }
            }
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + table + " SET qty = ? WHERE id = ?")) {
                ps.setInt(1, 2);
                ps.setLong(2, id);
                check(ps.executeUpdate() == 1, "UPDATE did not report 1 row");
            }
            try (PreparedStatement ps = c.prepareStatement("DELETE FROM " + table + " WHERE id = ?")) {
                ps.setLong(1, id);
                check(ps.executeUpdate() == 1, "DELETE did not report 1 row");
            }
        }
        check(count(table, id, id) == 0, "row still there after delete");
        return observed;
    }

    String commit(String table, long base) throws Exception {
        try (Connection c = connect()) {
            c.setAutoCommit(false);
            try (PreparedStatement ps = c.prepareStatement(insertSQL(table))) {
                bind(ps, base + 1, "c1", 1);
                ps.executeUpdate();
                bind(ps, base + 2, "c2", 2);
                ps.executeUpdate();
            }
            c.commit();
        }
        long n = count(table, base + 1, base + 2);
        check(n == 2, n + " rows after commit, want 2");
        return null;
    }

    String rollback(String table, long base) throws Exception {
        try (Connection c = connect()) {
            c.setAutoCommit(false);
            try (PreparedStatement ps = c.prepareStatement(insertSQL(table))) {
                bind(ps, base + 1, "r1", 1);
                ps.executeUpdate();
                bind(ps, base + 2, "r2", 2);
                ps.executeUpdate();
            }
            try (Statement st = c.createStatement();
                    ResultSet rs = st.executeQuery(
                            "SELECT COUNT(*) FROM " + table + " WHERE id BETWEEN " + (base + 1) + " AND " + (base + 2))) {
                rs.next();
                check(rs.getLong(1) == 2, rs.getLong(1) + " rows inside the transaction, want 2");
            }
            c.rollback();
        }
        long n = count(table, base + 1, base + 2);
        check(n == 0, n + " rows after rollback, want 0");
        return null;
    }

    String batch(String table, long base, String extra) throws Exception {
        int[] counts;
        try (Connection c = connect(extra); PreparedStatement ps = c.prepareStatement(insertSQL(table))) {
            for (int i = 1; i <= 10; i++) {
                bind(ps, base + i, "b" + i, i);
                ps.addBatch();
            }
            counts = ps.executeBatch();
        }
        long n = count(table, base + 1, base + 10);
        check(n == 10, n + " rows after the batch, want 10");
        return "update counts " + Arrays.toString(counts);
    }

    String genkeys(String table, long base) throws Exception {
        List<Long> ids = new ArrayList<>();
        try (Connection c = connect();
                PreparedStatement ps = c.prepareStatement(
                        "INSERT INTO " + table + " (name, qty, price, flag, created, note) VALUES (?, ?, ?, ?, ?, ?)",
                        Statement.RETURN_GENERATED_KEYS)) {
            for (String suffix : new String[] {"a", "b"}) {
                bind(ps, null, "g" + base + suffix, 1);
                check(ps.executeUpdate() == 1, "INSERT did not report 1 row");
                try (ResultSet keys = ps.getGeneratedKeys()) {
                    check(keys.next(), "no generated key");
                    ids.add(keys.getLong(1));
                }
            }
            check(ids.get(0) > 0 && ids.get(1) > 0 && !ids.get(0).equals(ids.get(1)), "generated keys " + ids);
            try (PreparedStatement q = c.prepareStatement("SELECT name FROM " + table + " WHERE id = ?")) {
                for (int i = 0; i < 2; i++) {
                    q.setLong(1, ids.get(i));
                    try (ResultSet rs = q.executeQuery()) {
                        check(rs.next(), "no row for generated key " + ids.get(i));
                        String want = "g" + base + (i == 0 ? "a" : "b");
                        check(rs.getString(1).equals(want), "row " + ids.get(i) + " is " + rs.getString(1) + ", want " + want);
                    }
                }
            }
        }
        return null;
    }

    String metadata(String table, long base) throws Exception {
        try (Connection c = connect()) {
            try (PreparedStatement ps = c.prepareStatement(insertSQL(table))) {
                bind(ps, base + 1, "meta", 1);
                ps.executeUpdate();
            }
            try (PreparedStatement ps = c.prepareStatement("SELECT " + COLS + " FROM " + table + " WHERE id = ?")) {
                ps.setLong(1, base + 1);
                try (ResultSet rs = ps.executeQuery()) {
                    ResultSetMetaData md = rs.getMetaData();
                    List<String> cols = new ArrayList<>();
                    List<String> names = new ArrayList<>();
                    for (int i = 1; i <= md.getColumnCount(); i++) {
                        names.add(md.getColumnLabel(i));
                        cols.add(md.getColumnLabel(i) + ":" + md.getColumnName(i) + " " + md.getColumnTypeName(i)
                                + "(" + md.getColumnType(i) + ") " + md.getColumnClassName(i) + " p" + md.getPrecision(i)
                                + " s" + md.getScale(i) + " null" + md.isNullable(i) + " table=" + md.getTableName(i)
                                + " catalog=" + md.getCatalogName(i));
                    }
                    check(names.equals(Arrays.asList(COLS.split(", "))), "columns " + names);
                    check(rs.next(), "no row");
                    return String.join("; ", cols);
                }
            }
        }
    }

    // dbmeta asks DatabaseMetaData about the one table, as schema tools and ORMs do, and reports every answer
    // that is wrong rather than only the first.
    String dbmeta(String table, long base) throws Exception {
        try (Connection c = connect()) {
            DatabaseMetaData md = c.getMetaData();
            String db = c.getCatalog();
            List<String> problems = new ArrayList<>();
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = md.getTables(db, null, table, new String[] {"TABLE"})) {
                while (rs.next()) {
                    tables.add(rs.getString("TABLE_NAME"));
                }
            }
            if (!tables.equals(Arrays.asList(table))) {
                problems.add("getTables(" + db + ", null, " + table + ") gives " + tables);
            }
            List<String> cols = new ArrayList<>();
            try (ResultSet rs = md.getColumns(db, null, table, "%")) {
                while (rs.next()) {
                    cols.add(rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME") + "(" + rs.getInt("DATA_TYPE")
                            + ") size " + rs.getInt("COLUMN_SIZE") + " nullable " + rs.getInt("NULLABLE")
                            + " autoinc " + rs.getString("IS_AUTOINCREMENT"));
                }
            }
            if (cols.size() != 7) {
                problems.add("getColumns(" + db + ", null, " + table + ", %) gives " + cols);
            }
            List<String> pk = new ArrayList<>();
            try (ResultSet rs = md.getPrimaryKeys(db, null, table)) {
                while (rs.next()) {
                    pk.add(rs.getString("COLUMN_NAME"));
                }
            }
            if (!pk.equals(Arrays.asList("id"))) {
                problems.add("getPrimaryKeys(" + db + ", null, " + table + ") gives " + pk);
            }
            check(problems.isEmpty(), String.join("; ", problems));
            return "tables " + tables + "; columns " + cols + "; primary key " + pk;
        }
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            switch (ch) {
                case '"':
                    b.append("\\\"");
                    break;
                case '\\':
                    b.append("\\\\");
                    break;
                case '\n':
                    b.append("\\n");
                    break;
                default:
                    if (ch < 0x20) {
                        b.append(String.format("\\u%04x", (int) ch));
                    } else {
                        b.append(ch);
                    }
            }
        }
        return b.append('"').toString();
    }

    // describe names a failure: the SQL error's code and state when it is one, and its causes.
    static String describe(Throwable e) {
        StringBuilder b = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (b.length() > 0) {
                b.append(" <- ");
            }
            b.append(t.getClass().getName());
            if (t instanceof SQLException) {
                SQLException se = (SQLException) t;
                b.append(" [").append(se.getErrorCode()).append("/").append(se.getSQLState()).append("]");
            }
            b.append(": ").append(t.getMessage());
            if (t.getCause() == t) {
                break;
            }
        }
        return b.toString();
    }

    public static void main(String[] args) {
        try {
            Class.forName("org.mariadb.jdbc.Driver");
        } catch (ClassNotFoundException e) {
            System.err.println("Matrix.java: no org.mariadb.jdbc.Driver: install Debian's libmariadb-java"
                    + " (scripts/deps.sh clients)");
            System.exit(3);
        }
        String host = System.getenv("CM_HOST");
        String url = "jdbc:mariadb://" + host + ":" + System.getenv("CM_PORT") + "/" + System.getenv("CM_DB");
        String auth = "user=" + System.getenv("CM_USER") + "&password=" + System.getenv("CM_PASSWORD")
                + "&connectTimeout=10000&socketTimeout=20000";
        String[] tables = System.getenv("CM_TABLES").split(",");
        for (String v : System.getenv("CM_VARIANTS").split(",")) {
            String[] kv = v.split("=");
            String variant = kv[0];
            long base = Long.parseLong(kv[1]);
            String ps;
            switch (variant) {
                case "connectorj-serverps":
                    ps = "&useServerPrepStmts=true";
                    break;
                case "connectorj-clientps":
                    ps = "&useServerPrepStmts=false";
                    break;
                default:
                    throw new IllegalArgumentException("unknown variant " + variant);
            }
            Matrix m = new Matrix(url, auth + ps);
            for (String table : tables) {
                Object[][] cases = {
                    {"crud", 1000, (Case) m::crud},
                    {"commit", 2000, (Case) m::commit},
                    {"rollback", 3000, (Case) m::rollback},
                    {"batch", 4000, (Case) (t, b) -> m.batch(t, b, "")},
                    {"batch-rewrite", 4300, (Case) (t, b) -> m.batch(t, b, "&rewriteBatchedStatements=true")},
                    {"batch-bulk", 4600, (Case) (t, b) -> m.batch(t, b, "&useBulkStmts=true")},
                    {"genkeys", 5000, (Case) m::genkeys},
                    {"metadata", 6000, (Case) m::metadata},
                    {"dbmeta", 7000, (Case) m::dbmeta},
                };
                for (Object[] cs : cases) {
                    String out = "{\"client\":" + json(variant) + ",\"case\":" + json((String) cs[0]) + ",\"table\":"
                            + json(table);
                    try {
                        String observed = ((Case) cs[2]).run(table, base + (Integer) cs[1]);
                        out += ",\"ok\":true";
                        if (observed != null) {
                            out += ",\"observed\":" + json(observed);
                        }
                    } catch (Throwable e) {
                        out += ",\"ok\":false,\"error\":" + json(describe(e));
                    }
                    System.out.println(out + "}");
                    System.out.flush();
                }
            }
        }
    }
}
