"""(issue 13 ps run: copied from 2026-11-24-issue13-final; additions at the end.)
Tables for summary.md from the raw files of this directory (copied from 2026-11-24-issue12-final; perpath and
T975 for n = 5..7 added for issue 13).

python3 summarize.py perpath results.csv

python3 summarize.py inprocess inprocess
python3 summarize.py sysbench results.csv after:before after-sharded:before-sharded
python3 summarize.py side results.csv after:before after-sharded:before-sharded
python3 summarize.py paired results.csv after:before after-sharded:before-sharded
"""
import csv, sys, statistics, re, glob
from collections import defaultdict

med = statistics.median


def mmm(xs):
    return med(xs), min(xs), max(xs)


def fmt(t, nd=1):
    m, lo, hi = t
    return f"{m:.{nd}f} [{lo:.{nd}f}–{hi:.{nd}f}]"


def sysbench_tables(path, pairs):
    rows = list(csv.DictReader(open(path)))
    cells = defaultdict(lambda: defaultdict(dict))  # (test, mode, threads) -> path -> round -> dict
    fails = defaultdict(list)
    for r in rows:
        key = (r['test'], r['mode'], r['threads'])
        if r['status'] != 'ok':
            fails[key].append((r['path'], r['round'], r['status']))
            continue
        q = float(r['queries'])
        d = dict(qps=float(r['qps']), p95=float(r['p95_ms']),
                 errors=int(r['errors'] or 0) + int(r['reconnects'] or 0))
        if r['proc_cpu_s']:
            d['cpu'] = float(r['proc_cpu_s']) * 1e6 / q
        if r['mallocs']:
            d['allocs'] = float(r['mallocs']) / q
        if r['gc_cycles']:
            d['gc'] = float(r['gc_cycles']) * 1e4 / q
        cells[key][r['path']][int(r['round'])] = d
    out = []
    for key, paths in cells.items():
        test, mode, threads = key
        out.append(f"\n#### {test}, --db-ps-mode={mode}, {threads} threads\n")
        out.append("| path | n | QPS median [min–max] | ratio to direct: of medians [per-round min–max] | ratio to relay: of medians [per-round min–max] "
                   "| CPU µs/query median [min–max] | allocs/query median [min–max] | GC/10k q | p95 ms median [min–max] | errors |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        D = paths.get('direct', {}); R = paths.get('relay', {})
        dq = med([d['qps'] for d in D.values()]); rq = med([d['qps'] for d in R.values()])
        for p, rs in paths.items():
            ds = list(rs.values())
            q = mmm([d['qps'] for d in ds])
            def ratio(ref, refmed):
                if p == ('direct' if ref is D else 'relay'):
                    return '1'
                per = [rs[i]['qps'] / ref[i]['qps'] for i in rs if i in ref]
                return f"{q[0] / refmed:.3f} [{min(per):.3f}–{max(per):.3f}]"
            cpu = fmt(mmm([d['cpu'] for d in ds])) if 'cpu' in ds[0] else '–'
            al = fmt(mmm([d['allocs'] for d in ds]), 2) if 'allocs' in ds[0] else '–'
            gc = f"{med([d['gc'] for d in ds]):.2f}" if 'gc' in ds[0] else '–'
            out.append(f"| {p} | {len(ds)} | {fmt(q, 0)} | {ratio(D, dq)} | {ratio(R, rq)} | {cpu} | {al} | {gc} | "
                       f"{fmt(mmm([d['p95'] for d in ds]), 2)} | {sum(d['errors'] for d in ds)} |")
        if fails.get(key):
            out.append("")
            out.append("Failed runs: " + "; ".join(f"{p} round {r}: {s}" for p, r, s in fails[key]))
        out.append("")
        out.append("| after / before | QPS: ratio of medians [per-round min–max, median] | CPU µs/query: ratio of medians [per-round min–max, median] "
                   "| allocs/query: before → after (medians), difference | p95: ratio of medians |")
        out.append("|---|---:|---:|---:|---:|")
        for a, b in pairs:
            if a not in paths or b not in paths:
                continue
            A, B = paths[a], paths[b]
            rs = sorted(set(A) & set(B))
            def row(k, nd=3):
                m = med([A[i][k] for i in A]) / med([B[i][k] for i in B])
                per = [A[i][k] / B[i][k] for i in rs]
                return f"{m:.{nd}f} [{min(per):.{nd}f}–{max(per):.{nd}f}, {med(per):.{nd}f}]"
            ab = med([B[i]['allocs'] for i in B]); aa = med([A[i]['allocs'] for i in A])
            p95 = med([A[i]['p95'] for i in A]) / med([B[i]['p95'] for i in B])
            out.append(f"| {a} / {b} | {row('qps')} | {row('cpu')} | {ab:.2f} → {aa:.2f}, {aa - ab:+.2f} | {p95:.3f} |")
    return "\n".join(out)


def inprocess_table(d):
    vals = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for side in ('before', 'after'):
        for f in sorted(glob.glob(f"{d}/{side}-r*.txt")):
            for line in open(f):
                m = re.match(r'^Benchmark(\S+?)-\d+\s+\d+\s+(.*)$', line)
                if not m:
                    continue
                name, rest = m.groups()
                toks = rest.split()
                for i in range(0, len(toks) - 1, 2):
                    vals[name][toks[i + 1]][side].append(float(toks[i]))
    out = ["| benchmark | n | ns/op before median [min–max] | ns/op after median [min–max] | after/before | B/op before → after | allocs/op before → after | allocs/row before → after |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, units in vals.items():
        nb = mmm(units['ns/op']['before']); na = mmm(units['ns/op']['after'])

        def ba(u, nd=0):
            if u not in units:
                return '–'
            def one(xs):
                s = f"{med(xs):.{nd}f}"
                return s if min(xs) == max(xs) else s + f" ({min(xs):.{nd}f}–{max(xs):.{nd}f})"
            return f"{one(units[u]['before'])} → {one(units[u]['after'])}"
        n = f"{len(units['ns/op']['before'])}/{len(units['ns/op']['after'])}"
        out.append(f"| {name} | {n} | {fmt(nb, 0)} | {fmt(na, 0)} | {na[0] / nb[0]:.3f} | {ba('B/op')} | {ba('allocs/op')} | {ba('allocs/row', 4)} |")
    return "\n".join(out)


def side(path, pairs):
    """Per cell, before and after side by side: metric rows, median [min–max] over rounds, after/before of medians."""
    rows = [r for r in csv.DictReader(open(path)) if r['status'] == 'ok']
    c = defaultdict(dict)  # (mode, path) -> round -> metrics
    for r in rows:
        q = float(r['queries'])
        c[(r['mode'], r['path'])][int(r['round'])] = dict(
            qps=float(r['qps']), p95=float(r['p95_ms']),
            cpu=float(r['proc_cpu_s']) * 1e6 / q if r['proc_cpu_s'] else None,
            allocs=float(r['mallocs']) / q if r['mallocs'] else None,
            db=float(r['db_cpu_s']) * 1e6 / q if r['db_cpu_s'] else None)
    modes = sorted({m for m, _ in c}, key=lambda m: m != 'disable')
    out = []
    for mode in modes:
        D, R = c[(mode, 'direct')], c[(mode, 'relay')]
        dq = med([d['qps'] for d in D.values()]); rq = med([d['qps'] for d in R.values()])
        for a, b in pairs:
            A, B = c[(mode, a)], c[(mode, b)]
            out.append(f"\n**{mode}, {b} vs {a}** (direct {dq:.0f} [{min(d['qps'] for d in D.values()):.0f}–{max(d['qps'] for d in D.values()):.0f}] QPS, "
                       f"relay {rq:.0f} [{min(d['qps'] for d in R.values()):.0f}–{max(d['qps'] for d in R.values()):.0f}] QPS, "
                       f"relay CPU {fmt(mmm([d['cpu'] for d in R.values()]))} µs/query)\n")
            out.append(f"| metric (median [min–max] over {len(B)}/{len(A)} rounds) | {b} | {a} | after/before (medians) |")
            out.append("|---|---:|---:|---:|")

            def line(label, f, nd):
                xb = [f(r, d) for r, d in B.items()]; xa = [f(r, d) for r, d in A.items()]
                out.append(f"| {label} | {fmt(mmm(xb), nd)} | {fmt(mmm(xa), nd)} | {med(xa) / med(xb):.3f} |")
            line('QPS', lambda r, d: d['qps'], 0)
            line('ratio to direct (same round)', lambda r, d: d['qps'] / D[r]['qps'], 3)
            line('ratio to relay (same round)', lambda r, d: d['qps'] / R[r]['qps'], 3)
            line('proxy CPU µs/query', lambda r, d: d['cpu'], 1)
            line('allocs/query', lambda r, d: d['allocs'], 2)
            line('p95 ms', lambda r, d: d['p95'], 2)
            line('MariaDB CPU µs/query', lambda r, d: d['db'], 1)
    return "\n".join(out)


T975 = {7: 2.365, 11: 2.201, 15: 2.131, 23: 2.069, 31: 2.040, 47: 2.012}  # two-sided 95 % t quantiles for n-1 degrees of freedom


def paired(path, pairs):
    """Per-round after/before ratios of CPU µs/query and QPS (same round, adjacent slots): geometric mean with a
    95 % t interval on the log ratios, and an exact two-sided sign test."""
    import math
    rows = [r for r in csv.DictReader(open(path)) if r['status'] == 'ok']
    c = {}
    for r in rows:
        q = float(r['queries'])
        c[(r['mode'], r['path'], int(r['round']))] = dict(qps=float(r['qps']), cpu=float(r['proc_cpu_s']) * 1e6 / q if r['proc_cpu_s'] else None,
                                                         db=float(r['db_cpu_s']) * 1e6 / q if r['db_cpu_s'] else None)
    modes = sorted({k[0] for k in c}, key=lambda m: m != 'disable')

    def stats(xs):
        ls = [math.log(x) for x in xs]; n = len(ls)
        m = sum(ls) / n; sd = statistics.stdev(ls); h = T975.get(n - 1, 2.0) * sd / math.sqrt(n)
        k = sum(x < 1 for x in xs); tail = sum(math.comb(n, i) for i in range(0, min(k, n - k) + 1)) / 2 ** n
        return f"{math.exp(m):.3f} [{math.exp(m - h):.3f}–{math.exp(m + h):.3f}]", f"{k}/{n}", f"{min(1.0, 2 * tail):.2f}"
    out = ["| cell | pair | n | CPU/query after/before: geomean [95 % CI] | rounds after lower | sign test p | QPS after/before: geomean [95 % CI] | MariaDB CPU/query after/before: geomean [95 % CI] | per-round CPU ratios |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    allc, allq, alld = [], [], []
    for mode in modes:
        for a, b in pairs:
            rs = sorted(i for (m, p, i) in c if m == mode and p == a and (mode, b, i) in c)
            cr = [c[(mode, a, i)]['cpu'] / c[(mode, b, i)]['cpu'] for i in rs]
            qr = [c[(mode, a, i)]['qps'] / c[(mode, b, i)]['qps'] for i in rs]
            dr = [c[(mode, a, i)]['db'] / c[(mode, b, i)]['db'] for i in rs]
            allc += cr; allq += qr; alld += dr
            g, k, pv = stats(cr); gq, _, _ = stats(qr); gd, _, _ = stats(dr)
            out.append(f"| {mode} | {a} / {b} | {len(rs)} | {g} | {k} | {pv} | {gq} | {gd} | {' '.join(f'{x:.2f}' for x in cr)} |")
    g, k, pv = stats(allc); gq, _, _ = stats(allq); gd, _, _ = stats(alld)
    out.append(f"| all cells | pooled | {len(allc)} | {g} | {k} | {pv} | {gq} | {gd} | |")
    return "\n".join(out)


if __name__ == '__main__':
    if sys.argv[1] == 'inprocess':
        print(inprocess_table(sys.argv[2]))
    elif sys.argv[1] == 'side':
        print(side(sys.argv[2], [tuple(p.split(':')) for p in sys.argv[3:]]))
    elif sys.argv[1] == 'paired':
        print(paired(sys.argv[2], [tuple(p.split(':')) for p in sys.argv[3:]]))
    elif sys.argv[1] == 'sysbench':
        print(sysbench_tables(sys.argv[2], [tuple(p.split(':')) for p in sys.argv[3:]]))


# --- issue 13 additions ---
T975.update({4: 2.776, 5: 2.571, 6: 2.447})


def perpath(path):
    """One row per mode x path: median [min–max] over rounds."""
    rows = list(csv.DictReader(open(path)))
    c = defaultdict(dict); fails = []
    for r in rows:
        if r['status'] != 'ok':
            fails.append(f"{r['mode']} {r['path']} round {r['round']}: {r['status']}"); continue
        q = float(r['queries'])
        c[(r['mode'], r['path'])][int(r['round'])] = dict(
            qps=float(r['qps']), p95=float(r['p95_ms']),
            cpu=float(r['proc_cpu_s']) * 1e6 / q if r['proc_cpu_s'] else None,
            allocs=float(r['mallocs']) / q if r['mallocs'] else None,
            gc=float(r['gc_cycles']) * 1e4 / q if r['gc_cycles'] else None,
            db=float(r['db_cpu_s']) * 1e6 / q if r['db_cpu_s'] else None,
            err=int(r['errors'] or 0) + int(r['reconnects'] or 0))
    order = ['direct', 'relay', 'p13before', 'prev', 'head', 'head-tls']
    out = ["| mode | path | n | QPS median [min–max] | ratio to direct (medians) | CPU µs/query median [min–max] | allocs/query | GC/10k q | p95 ms | MariaDB CPU µs/q | errors |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in ('disable', 'auto'):
        D = c.get((mode, 'direct'), {})
        dq = med([d['qps'] for d in D.values()]) if D else None
        for p in order:
            rs = c.get((mode, p))
            if not rs:
                continue
            ds = list(rs.values())
            def m(k, nd):
                xs = [d[k] for d in ds if d[k] is not None]
                return fmt(mmm(xs), nd) if xs else '–'
            al = [d['allocs'] for d in ds if d['allocs'] is not None]
            gc = [d['gc'] for d in ds if d['gc'] is not None]
            q = med([d['qps'] for d in ds])
            out.append(f"| {'text' if mode == 'disable' else 'prepared'} | {p} | {len(ds)} | {fmt(mmm([d['qps'] for d in ds]), 0)} | "
                       f"{q / dq:.3f} | {m('cpu', 1)} | {f'{med(al):.2f}' if al else '–'} | {f'{med(gc):.2f}' if gc else '–'} | "
                       f"{med([d['p95'] for d in ds]):.2f} | {m('db', 1)} | {sum(d['err'] for d in ds)} |")
    if fails:
        out.append("\nFailed runs: " + "; ".join(fails))
    return "\n".join(out)


if __name__ == '__main__' and sys.argv[1] == 'perpath':
    print(perpath(sys.argv[2]))


# --- issue 13 ps additions ---
T975.update({13: 2.160})


def load2(main, rev):
    """Rows of results.csv and reversed/results.csv; the reversed pass's mode is renamed auto-rev."""
    rows = list(csv.DictReader(open(main)))
    for r in csv.DictReader(open(rev)):
        r['mode'] = 'auto-rev'
        rows.append(r)
    return rows


def perpath2(main, rev):
    import tempfile, os
    rows = load2(main, rev)
    fd, tmp = tempfile.mkstemp(suffix='.csv'); os.close(fd)
    with open(tmp, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys())); w.writeheader(); w.writerows(rows)
    out = perpath(tmp)
    # perpath knows only disable/auto: the reversed pass goes through it again under the name auto.
    rows2 = [dict(r, mode='auto') for r in rows if r['mode'] == 'auto-rev']
    with open(tmp, 'w', newline='') as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys())); w.writeheader(); w.writerows(rows2)
    rev_lines = [l.replace('| prepared |', '| prepared-reversed |') for l in perpath(tmp).split('\n')[2:]]
    os.unlink(tmp)
    return out + '\n' + '\n'.join(rev_lines)


def paired2(main, rev, pairs):
    """paired() over text, prepared, prepared-reversed and prepared pooled over both passes (no cross-pair pooling)."""
    import math
    c = {}
    for r in load2(main, rev):
        if r['status'] != 'ok':
            continue
        q = float(r['queries'])
        d = dict(qps=float(r['qps']), cpu=float(r['proc_cpu_s']) * 1e6 / q if r['proc_cpu_s'] else None,
                 db=float(r['db_cpu_s']) * 1e6 / q if r['db_cpu_s'] else None)
        c[(r['mode'], r['path'], int(r['round']))] = d
        if r['mode'] in ('auto', 'auto-rev'):
            c[('auto+rev', r['path'], int(r['round']) + (100 if r['mode'] == 'auto-rev' else 0))] = d

    def stats(xs):
        ls = [math.log(x) for x in xs]; n = len(ls)
        m = sum(ls) / n; sd = statistics.stdev(ls); h = T975[n - 1] * sd / math.sqrt(n)
        k = sum(x < 1 for x in xs); tail = sum(math.comb(n, i) for i in range(0, min(k, n - k) + 1)) / 2 ** n
        return f"{math.exp(m):.3f} [{math.exp(m - h):.3f}–{math.exp(m + h):.3f}]", f"{k}/{n}", f"{min(1.0, 2 * tail):.2f}"
    names = {'disable': 'text', 'auto': 'prepared', 'auto-rev': 'prepared-reversed', 'auto+rev': 'prepared pooled'}
    out = ["| cell | pair | n | CPU/query after/before: geomean [95 % CI] | rounds after lower | sign test p | QPS after/before: geomean [95 % CI] | MariaDB CPU/query after/before: geomean [95 % CI] | per-round CPU ratios |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for a, b in pairs:
        for mode in ('disable', 'auto', 'auto-rev', 'auto+rev'):
            rs = sorted(i for (m, p, i) in c if m == mode and p == a and (mode, b, i) in c)
            if len(rs) < 2:
                continue
            cr = [c[(mode, a, i)]['cpu'] / c[(mode, b, i)]['cpu'] for i in rs]
            qr = [c[(mode, a, i)]['qps'] / c[(mode, b, i)]['qps'] for i in rs]
            dr = [c[(mode, a, i)]['db'] / c[(mode, b, i)]['db'] for i in rs]
            g, k, pv = stats(cr); gq, _, _ = stats(qr); gd, _, _ = stats(dr)
            per = ' '.join(f'{x:.2f}' for x in cr) if mode != 'auto+rev' else ''
            out.append(f"| {names[mode]} | {a} / {b} | {len(rs)} | {g} | {k} | {pv} | {gq} | {gd} | {per} |")
    return "\n".join(out)


if __name__ == '__main__' and sys.argv[1] == 'perpath2':
    print(perpath2(sys.argv[2], sys.argv[3]))
if __name__ == '__main__' and sys.argv[1] == 'paired2':
    print(paired2(sys.argv[2], sys.argv[3], [tuple(p.split(':')) for p in sys.argv[4:]]))
