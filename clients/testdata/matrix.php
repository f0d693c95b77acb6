<?php
// The client matrix's PHP client: PDO_MySQL with emulated and with native prepares, and mysqli with prepared
// statements (Debian's php-mysql, mysqlnd underneath).
//
// clients/clients_test.go runs this file with php, once against MariaDB directly and once through the proxy,
// and compares what it prints. The environment says where and what:
//
//   CM_HOST, CM_PORT, CM_USER, CM_PASSWORD, CM_DB  the server and database
//   CM_TABLES     comma-separated tables to run every case on (all have the same columns)
//   CM_VARIANTS   comma-separated variant=base pairs; a variant is pdo-emulate, pdo-native or mysqli, and base is
//                 the first id of its own range, so that variants never touch each other's rows
//
// Each case prints one JSON line {client, case, table, ok, error, observed}. A case checks its own expectations
// and fails with the exception it met; observed is what the client saw that must be the same through the proxy
// as directly (PHP types of fetched values, result-set metadata). Exit status 3 means an extension is missing.

foreach (['pdo_mysql', 'mysqli'] as $ext) {
    if (!extension_loaded($ext)) {
        fwrite(STDERR, "matrix.php: PHP extension $ext is missing: install Debian's php-mysql (scripts/deps.sh clients)\n");
        exit(3);
    }
}

const COLS = 'id, name, qty, price, flag, created, note';
const WHEN = '2024-01-02 03:04:05';

function check($cond, $what)
{
    if (!$cond) {
        throw new RuntimeException($what);
    }
}

// rowArgs are the seven column values of one row, id first; a null id leaves it out.
function rowArgs($id, $name, $qty)
{
    $args = [$name, $qty, '12.50', 1, WHEN, null];
    if ($id !== null) {
        array_unshift($args, $id);
    }
    return $args;
}

function insertSQL($table, $rows = 1)
{
    return "INSERT INTO $table (" . COLS . ') VALUES ' . implode(', ', array_fill(0, $rows, '(?, ?, ?, ?, ?, ?, ?)'));
}

function types($row)
{
    return implode(' ', array_map(fn($v) => get_debug_type($v), array_values($row)));
}

// Db is what a case needs from a connection; PdoDb and MysqliDb implement it with prepared statements.
interface Db
{
    // exec runs a statement with parameters and returns its affected rows.
    public function exec(string $sql, array $args = []): int;
    // query runs a statement with parameters and returns its rows as associative arrays.
    public function query(string $sql, array $args = []): array;
    // meta runs a query and describes its result set's columns.
    public function meta(string $sql, array $args): array;
    public function begin(): void;
    public function commit(): void;
    public function rollback(): void;
    public function lastId(): string;
}

class PdoDb implements Db
{
    private PDO $pdo;

    public function __construct(bool $emulate)
    {
        $dsn = sprintf('mysql:host=%s;port=%s;dbname=%s;charset=utf8mb4', getenv('CM_HOST'), getenv('CM_PORT'), getenv('CM_DB'));
        $this->pdo = new PDO($dsn, getenv('CM_USER'), getenv('CM_PASSWORD'), [
            PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION,
            PDO::ATTR_EMULATE_PREPARES => $emulate,
            PDO::ATTR_TIMEOUT => 10,
        ]);
    }

    public function exec(string $sql, array $args = []): int
    {
        $st = $this->pdo->prepare($sql);
        $st->execute($args);
        return $st->rowCount();
    }

    public function query(string $sql, array $args = []): array
    {
        $st = $this->pdo->prepare($sql);
        $st->execute($args);
        return $st->fetchAll(PDO::FETCH_ASSOC);
    }

    public function meta(string $sql, array $args): array
    {
        $st = $this->pdo->prepare($sql);
        $st->execute($args);
        $out = [];
        for ($i = 0; $i < $st->columnCount(); $i++) {
            $m = $st->getColumnMeta($i);
            $out[] = [$m['name'], sprintf('%s native_type=%s pdo_type=%d len=%d precision=%d flags=%s table=%s',
                $m['name'], $m['native_type'] ?? '-', $m['pdo_type'], $m['len'], $m['precision'],
                implode(',', $m['flags']), $m['table'])];
        }
        $st->fetchAll();
        return $out;
    }

    public function begin(): void
    {
        $this->pdo->beginTransaction();
    }

    public function commit(): void
    {
        $this->pdo->commit();
    }

    public function rollback(): void
    {
        $this->pdo->rollBack();
    }

    public function lastId(): string
    {
        return $this->pdo->lastInsertId();
    }
}

class MysqliDb implements Db
{
    private mysqli $m;

    public function __construct()
    {
        mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
        $this->m = mysqli_init();
        $this->m->options(MYSQLI_OPT_CONNECT_TIMEOUT, 10);
        $this->m->options(MYSQLI_OPT_READ_TIMEOUT, 20);
        $this->m->real_connect(getenv('CM_HOST'), getenv('CM_USER'), getenv('CM_PASSWORD'), getenv('CM_DB'), (int) getenv('CM_PORT'));
        $this->m->set_charset('utf8mb4');
    }

    private function run(string $sql, array $args): mysqli_stmt
    {
        $st = $this->m->prepare($sql);
        $st->execute($args ?: null);
        return $st;
    }

    public function exec(string $sql, array $args = []): int
    {
        $st = $this->run($sql, $args);
        $n = $st->affected_rows;
        $st->close();
        return $n;
    }

    public function query(string $sql, array $args = []): array
    {
        $st = $this->run($sql, $args);
        $rows = $st->get_result()->fetch_all(MYSQLI_ASSOC);
        $st->close();
        return $rows;
    }

    public function meta(string $sql, array $args): array
    {
        $st = $this->run($sql, $args);
        $out = [];
        foreach ($st->result_metadata()->fetch_fields() as $f) {
            $out[] = [$f->name, sprintf('%s orgname=%s table=%s orgtable=%s db=%s type=%d length=%d flags=%d decimals=%d charsetnr=%d',
                $f->name, $f->orgname, $f->table, $f->orgtable, $f->db, $f->type, $f->length, $f->flags, $f->decimals, $f->charsetnr)];
        }
        $st->get_result()->fetch_all();
        $st->close();
        return $out;
    }

    public function begin(): void
    {
        $this->m->begin_transaction();
    }

    public function commit(): void
    {
        $this->m->commit();
    }

    public function rollback(): void
    {
        $this->m->rollback();
    }

    public function lastId(): string
    {
        return (string) $this->m->insert_id;
    }
}

function count_rows(callable $connect, string $table, int $lo, int $hi): int
{
    $rows = $connect()->query("SELECT COUNT(*) AS n FROM $table WHERE id BETWEEN ? AND ?", [$lo, $hi]);
    return (int) $rows[0]['n'];
}

function case_crud(callable $connect, string $table, int $base)
{
    $id = $base + 1;
    $db = $connect();
    check($db->exec(insertSQL($table), rowArgs($id, 'alpha', 1)) === 1, 'INSERT did not report 1 row');
    $rows = $db->query('SELECT ' . COLS . " FROM $table WHERE id = ?", [$id]);
    check(count($rows) === 1, count($rows) . ' rows after insert, want 1');
    $r = $rows[0];
    $got = [(int) $r['id'], $r['name'], (int) $r['qty'], (string) $r['price'], (int) $r['flag'], $r['created'], $r['note']];
    $want = [$id, 'alpha', 1, '12.50', 1, WHEN, null];
    check($got === $want, 'read back ' . json_encode($got) . ', want ' . json_encode($want));
    check($db->exec("UPDATE $table SET qty = ? WHERE id = ?", [2, $id]) === 1, 'UPDATE did not report 1 row');
    $n = $db->exec("UPDATE $table SET qty = ? WHERE id = ?", [2, $id]);
    check($n === 0, "UPDATE to the same value reported $n rows, want 0 (changed rows)");
    check($db->exec("DELETE FROM $table WHERE id = ?", [$id]) === 1, 'DELETE did not report 1 row');
    check(count($db->query("SELECT id FROM $table WHERE id = ?", [$id])) === 0, 'row still there after delete');
    return types($r);
}

function case_commit(callable $connect, string $table, int $base)
{
    $db = $connect();
    $db->begin();
    $db->exec(insertSQL($table), rowArgs($base + 1, 'c1', 1));
    $db->exec(insertSQL($table), rowArgs($base + 2, 'c2', 2));
    $db->commit();
    $n = count_rows($connect, $table, $base + 1, $base + 2);
    check($n === 2, "$n rows after commit, want 2");
}

function case_rollback(callable $connect, string $table, int $base)
{
    $db = $connect();
    $db->begin();
    $db->exec(insertSQL($table), rowArgs($base + 1, 'r1', 1));
    $db->exec(insertSQL($table), rowArgs($base + 2, 'r2', 2));
    $in = (int) $db->query("SELECT COUNT(*) AS n FROM $table WHERE id BETWEEN ? AND ?", [$base + 1, $base + 2])[0]['n'];
    check($in === 2, "$in rows inside the transaction, want 2");
    $db->rollback();
    $n = count_rows($connect, $table, $base + 1, $base + 2);
    check($n === 0, "$n rows after rollback, want 0");
}

function case_batch(callable $connect, string $table, int $base)
{
    $args = [];
    for ($i = 1; $i <= 10; $i++) {
        $args = array_merge($args, rowArgs($base + $i, "b$i", $i));
    }
    $n = $connect()->exec(insertSQL($table, 10), $args);
    check($n === 10, "multi-row INSERT reported $n rows, want 10");
    $r = $connect()->query("SELECT COUNT(*) AS n, SUM(qty) AS s FROM $table WHERE id BETWEEN ? AND ?", [$base + 1, $base + 10])[0];
    check((int) $r['n'] === 10 && (int) $r['s'] === 55, "count, sum = {$r['n']}, {$r['s']}; want 10, 55");
}

function case_genkeys(callable $connect, string $table, int $base)
{
    $db = $connect();
    $sql = "INSERT INTO $table (name, qty, price, flag, created, note) VALUES (?, ?, ?, ?, ?, ?)";
    $ids = [];
    foreach (['a', 'b'] as $s) {
        check($db->exec($sql, rowArgs(null, "g$base$s", 1)) === 1, 'INSERT did not report 1 row');
        $ids[] = $db->lastId();
    }
    check((int) $ids[0] > 0 && (int) $ids[1] > 0 && $ids[0] !== $ids[1], 'generated keys ' . json_encode($ids));
    foreach ($ids as $i => $id) {
        $rows = $db->query("SELECT name FROM $table WHERE id = ?", [(int) $id]);
        $want = "g$base" . ($i === 0 ? 'a' : 'b');
        check(count($rows) === 1 && $rows[0]['name'] === $want, "row $id is " . json_encode($rows) . ", want $want");
    }
}

function case_metadata(callable $connect, string $table, int $base)
{
    $db = $connect();
    $db->exec(insertSQL($table), rowArgs($base + 1, 'meta', 1));
    $cols = $db->meta('SELECT ' . COLS . " FROM $table WHERE id = ?", [$base + 1]);
    $names = array_column($cols, 0);
    check($names === explode(', ', COLS), 'columns ' . json_encode($names));
    return implode('; ', array_column($cols, 1));
}

$cases = [
    ['crud', 'case_crud', 1000],
    ['commit', 'case_commit', 2000],
    ['rollback', 'case_rollback', 3000],
    ['batch', 'case_batch', 4000],
    ['genkeys', 'case_genkeys', 5000],
    ['metadata', 'case_metadata', 6000],
];

foreach (explode(',', getenv('CM_VARIANTS')) as $v) {
    [$variant, $base] = explode('=', $v);
    $connect = match ($variant) {
        'pdo-emulate' => fn() => new PdoDb(true),
        'pdo-native' => fn() => new PdoDb(false),
        'mysqli' => fn() => new MysqliDb(),
    };
    foreach (explode(',', getenv('CM_TABLES')) as $table) {
        foreach ($cases as [$name, $fn, $offset]) {
            $out = ['client' => $variant, 'case' => $name, 'table' => $table, 'ok' => true];
            try {
                $observed = $fn($connect, $table, (int) $base + $offset);
                if ($observed !== null) {
                    $out['observed'] = $observed;
                }
            } catch (Throwable $e) {
                $out['ok'] = false;
                $out['error'] = get_class($e) . ' [' . $e->getCode() . ']: ' . $e->getMessage();
            }
            echo json_encode($out, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE), "\n";
        }
    }
}
