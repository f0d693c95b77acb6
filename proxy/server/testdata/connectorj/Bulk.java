import java.sql.*;
import java.util.Arrays;

// Bulk runs batches of a prepared INSERT through MariaDB Connector/J with
// useBulkStmts (COM_STMT_BULK_EXECUTE when the server announces it) and
// prints what the driver reports: TestConnectorJBulk reads it.
public class Bulk {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0])) {
            try (PreparedStatement p = c.prepareStatement("INSERT INTO acct (id, balance) VALUES (?, ?)")) {
                for (int i = 201; i <= 210; i++) {
                    p.setInt(1, i);
                    p.setInt(2, i);
                    p.addBatch();
                }
                System.out.println("insert " + Arrays.toString(p.executeBatch()));
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO acct (id, balance) VALUES (?, ?)")) {
                p.setInt(1, 211);
                p.setInt(2, 1);
                p.addBatch();
                p.setInt(1, 201);
                p.setInt(2, 1);
                p.addBatch();
                try {
                    p.executeBatch();
                    System.out.println("duplicate none");
                } catch (BatchUpdateException e) {
                    System.out.println("duplicate " + e.getErrorCode());
                }
            }
            try (PreparedStatement p = c.prepareStatement("UPDATE acct SET balance = balance + ? WHERE id = ?")) {
                for (int i = 201; i <= 210; i += 3) {
                    p.setInt(1, 1000);
                    p.setInt(2, i);
                    p.addBatch();
                }
                System.out.println("update " + Arrays.toString(p.executeBatch()));
            }
            try (Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT COUNT(*), SUM(balance) FROM acct WHERE id > 200")) {
                rs.next();
                System.out.println("rows " + rs.getInt(1) + " " + rs.getLong(2));
            }
        }
    }
}
