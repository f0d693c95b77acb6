#!/usr/bin/python3
"""The client matrix's Python client: SQLAlchemy's ORM over PyMySQL and over mysqlclient (MySQLdb).

clients/clients_test.go runs this file with Debian's /usr/bin/python3, once against MariaDB directly and once
through the proxy, and compares what it prints. The environment says where and what:

  CM_HOST, CM_PORT, CM_USER, CM_PASSWORD, CM_DB  the server and database
  CM_TABLES     comma-separated tables to run every case on (all have the same columns)
  CM_VARIANTS   comma-separated variant=base pairs; a variant is pymysql or mysqlclient, and base is the first
                id of its own range, so that variants never touch each other's rows

Each case prints one JSON line {client, case, table, ok, error, observed}. A case checks its own expectations
and fails with the exception it met; observed is what the client saw that must be the same through the proxy
as directly (result-set metadata, Python types of fetched values). Exit status 3 means a module is missing.
"""

import datetime
import decimal
import json
import os
import sys

try:
    import sqlalchemy
    from sqlalchemy import BigInteger, Boolean, Column, DateTime, Integer, Numeric, String, Text, func, select, text
    from sqlalchemy.orm import Session, declarative_base
except ImportError as e:
    print(f"matrix.py: {e}: install Debian's python3-sqlalchemy (scripts/deps.sh clients)", file=sys.stderr)
    sys.exit(3)

DRIVERS = {
    # variant: (module, Debian package, SQLAlchemy dialect+driver)
    "pymysql": ("pymysql", "python3-pymysql", "mysql+pymysql"),
    "mysqlclient": ("MySQLdb", "python3-mysqldb", "mysql+mysqldb"),
}

WHEN = datetime.datetime(2024, 1, 2, 3, 4, 5)

Base = declarative_base()
models = {}


def model(table):
    """The ORM class mapped to table (one class per table name)."""
    if table not in models:
        models[table] = type(
            "Row_" + table,
            (Base,),
            {
                "__tablename__": table,
                "id": Column(BigInteger, primary_key=True, autoincrement=True),
                "name": Column(String(64), nullable=False),
                "qty": Column(Integer, nullable=False),
                "price": Column(Numeric(10, 2), nullable=False),
                "flag": Column(Boolean, nullable=False),
                "created": Column(DateTime, nullable=True),
                "note": Column(Text, nullable=True),
            },
        )
    return models[table]


def row(m, id, name, qty=1):
    kw = dict(name=name, qty=qty, price=decimal.Decimal("12.50"), flag=True, created=WHEN, note=None)
    if id is not None:
        kw["id"] = id
    return m(**kw)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def count(engine, m, lo, hi):
    """Rows with ids in [lo, hi], read on a fresh session (a fresh connection from the pool's view)."""
    with Session(engine) as s:
        return s.execute(select(func.count()).select_from(m).where(m.id.between(lo, hi))).scalar_one()


def case_crud(engine, m, base):
    id = base + 1
    with Session(engine) as s:
        s.add(row(m, id, "alpha"))
        s.commit()
    with Session(engine) as s:
        r = s.get(m, id)
        check(r is not None, f"row {id} not found after insert")
        got = (r.id, r.name, r.qty, r.price, r.flag, r.created, r.note)
        want = (id, "alpha", 1, decimal.Decimal("12.50"), True, WHEN, None)
        check(got == want, f"read back {got!r}, want {want!r}")
        r.qty = 2
        s.commit()
        n = s.query(m).filter(m.id == id).update({"qty": 3}, synchronize_session=False)
        check(n == 1, f"UPDATE matched {n} rows, want 1")
        s.commit()
    with Session(engine) as s:
        r = s.get(m, id)
        check(r.qty == 3, f"qty {r.qty} after updates, want 3")
        s.delete(r)
        s.commit()
    with Session(engine) as s:
        check(s.get(m, id) is None, f"row {id} still there after delete")
    return " ".join(type(v).__name__ for v in got)


def case_commit(engine, m, base):
    with Session(engine) as s:
        s.add_all([row(m, base + 1, "c1"), row(m, base + 2, "c2")])
        s.commit()
    n = count(engine, m, base + 1, base + 2)
    check(n == 2, f"{n} rows after commit, want 2")


def case_rollback(engine, m, base):
    with Session(engine) as s:
        s.add_all([row(m, base + 1, "r1"), row(m, base + 2, "r2")])
        s.flush()
        n = s.execute(select(func.count()).select_from(m).where(m.id.between(base + 1, base + 2))).scalar_one()
        check(n == 2, f"{n} rows inside the transaction, want 2")
        s.rollback()
    n = count(engine, m, base + 1, base + 2)
    check(n == 0, f"{n} rows after rollback, want 0")


def case_batch(engine, m, base):
    rows = [
        dict(id=base + i, name=f"b{i}", qty=i, price=decimal.Decimal("1.25"), flag=False, created=WHEN, note="n")
        for i in range(1, 11)
    ]
    with Session(engine) as s:
        s.bulk_insert_mappings(m, rows)  # one executemany: a multi-row INSERT in both drivers
        s.commit()
    with Session(engine) as s:
        n, total = s.execute(
            select(func.count(), func.sum(m.qty)).where(m.id.between(base + 1, base + 10))
        ).one()
    check((n, total) == (10, 55), f"count, sum = {n}, {total}; want 10, 55")


def case_genkeys(engine, m, base):
    with Session(engine) as s:
        a, b = row(m, None, f"g{base}a"), row(m, None, f"g{base}b")
        s.add(a)
        s.flush()
        s.add(b)
        s.flush()
        ids = (a.id, b.id)
        s.commit()
    check(all(isinstance(i, int) and i > 0 for i in ids) and ids[0] != ids[1], f"generated keys {ids!r}")
    with Session(engine) as s:
        names = [s.get(m, i).name for i in ids]
    check(names == [f"g{base}a", f"g{base}b"], f"rows by generated keys: {names!r}")


def case_metadata(engine, m, base):
    id = base + 1
    with Session(engine) as s:
        s.add(row(m, id, "meta"))
        s.commit()
    with engine.connect() as c:
        res = c.execute(
            text(f"SELECT id, name, qty, price, flag, created, note FROM {m.__tablename__} WHERE id = :id"), {"id": id}
        )
        desc = res.cursor.description
        vals = res.fetchall()
    names = [d[0] for d in desc]
    want = ["id", "name", "qty", "price", "flag", "created", "note"]
    check(names == want, f"columns {names!r}, want {want!r}")
    check(len(vals) == 1, f"{len(vals)} rows, want 1")
    return "; ".join(repr(tuple(d)) for d in desc) + " | " + " ".join(type(v).__name__ for v in vals[0])


CASES = [
    ("crud", case_crud, 1000),
    ("commit", case_commit, 2000),
    ("rollback", case_rollback, 3000),
    ("batch", case_batch, 4000),
    ("genkeys", case_genkeys, 5000),
    ("metadata", case_metadata, 6000),
]


def main():
    env = os.environ
    tables = env["CM_TABLES"].split(",")
    variants = [v.split("=") for v in env["CM_VARIANTS"].split(",")]
    for variant, _ in variants:
        mod, pkg, _ = DRIVERS[variant]
        try:
            __import__(mod)
        except ImportError as e:
            print(f"matrix.py: {e}: install Debian's {pkg} (scripts/deps.sh clients)", file=sys.stderr)
            sys.exit(3)
    for variant, base in variants:
        base = int(base)
        mod, _, dialect = DRIVERS[variant]
        url = sqlalchemy.engine.URL.create(
            dialect,
            username=env["CM_USER"],
            password=env["CM_PASSWORD"],
            host=env["CM_HOST"],
            port=int(env["CM_PORT"]),
            database=env["CM_DB"],
            query={"charset": "utf8mb4"},
        )
        timeouts = {"connect_timeout": 10, "read_timeout": 20, "write_timeout": 20}
        engine = sqlalchemy.create_engine(url, connect_args=timeouts, future=True)
        for table in tables:
            m = model(table)
            for name, fn, offset in CASES:
                out = {"client": variant, "case": name, "table": table, "ok": True}
                try:
                    observed = fn(engine, m, base + offset)
                    if observed:
                        out["observed"] = observed
                except Exception as e:  # every failure is a result; the run goes on
                    out["ok"] = False
                    err = e.orig if isinstance(e, sqlalchemy.exc.DBAPIError) and e.orig is not None else e
                    out["error"] = f"{type(err).__module__}.{type(err).__name__}: {err}"
                print(json.dumps(out), flush=True)
        engine.dispose()


if __name__ == "__main__":
    main()
