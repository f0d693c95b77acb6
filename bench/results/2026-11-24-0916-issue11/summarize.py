import csv, sys, statistics, re, glob, os
from collections import defaultdict

def med_spread(xs):
    m = statistics.median(xs)
    return m, min(xs), max(xs)

def fmt(m, lo, hi, nd=1):
    return f"{m:.{nd}f} [{lo:.{nd}f}–{hi:.{nd}f}]"

def sysbench_table(path, pairs):
    rows = list(csv.DictReader(open(path)))
    cells = defaultdict(lambda: defaultdict(list))  # (test,mode) -> path -> list of dicts
    for r in rows:
        if r['status'] != 'ok':
            cells[(r['test'], r['mode'])][r['path'] + '!fail'].append(r['status'])
            continue
        q = float(r['queries'])
        d = dict(qps=float(r['qps']), p95=float(r['p95_ms']), errors=int(r['errors'] or 0) + int(r['reconnects'] or 0))
        if r['proc_cpu_s']:
            d['cpu'] = float(r['proc_cpu_s']) * 1e6 / q
        if r['mallocs']:
            d['allocs'] = float(r['mallocs']) / q
        if r['gc_cycles']:
            d['gc'] = float(r['gc_cycles']) * 1e4 / q
        d['round'] = int(r['round'])
        cells[(r['test'], r['mode'])][r['path']].append(d)
    out = []
    for (test, mode), paths in cells.items():
        out.append(f"\n#### {test}, --db-ps-mode={mode}, 16 threads\n")
        out.append("| path | n | QPS median [min–max] | ratio to direct | CPU µs/query median [min–max] | allocs/query median [min–max] | GC/10k q | p95 ms (median) | errors |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        dq = statistics.median([d['qps'] for d in paths['direct']]) if paths.get('direct') else None
        for p, ds in paths.items():
            if p.endswith('!fail'):
                out.append(f"| {p[:-5]} | failed: {len(ds)} | {ds[0]} | | | | | | |")
                continue
            q = med_spread([d['qps'] for d in ds])
            cpu = med_spread([d['cpu'] for d in ds]) if 'cpu' in ds[0] else None
            al = med_spread([d['allocs'] for d in ds]) if 'allocs' in ds[0] else None
            gc = statistics.median([d['gc'] for d in ds]) if 'gc' in ds[0] else None
            out.append(f"| {p} | {len(ds)} | {fmt(*q, nd=0)} | {q[0]/dq:.2f} | {fmt(*cpu) if cpu else '–'} | {fmt(*al, nd=2) if al else '–'} | {f'{gc:.2f}' if gc is not None else '–'} | {statistics.median([d['p95'] for d in ds]):.2f} | {sum(d['errors'] for d in ds)} |")
        out.append("")
        out.append("| after / before | QPS ratio of medians | per-round QPS ratios [min–max] | CPU µs/query ratio of medians | per-round CPU ratios [min–max] | allocs/query after − before (medians) |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for a, b in pairs:
            if a not in paths or b not in paths:
                continue
            A = {d['round']: d for d in paths[a]}; B = {d['round']: d for d in paths[b]}
            rs = sorted(set(A) & set(B))
            qr = [A[r]['qps'] / B[r]['qps'] for r in rs]
            cr = [A[r]['cpu'] / B[r]['cpu'] for r in rs]
            qm = statistics.median([d['qps'] for d in paths[a]]) / statistics.median([d['qps'] for d in paths[b]])
            cm = statistics.median([d['cpu'] for d in paths[a]]) / statistics.median([d['cpu'] for d in paths[b]])
            am = statistics.median([d['allocs'] for d in paths[a]]) - statistics.median([d['allocs'] for d in paths[b]])
            out.append(f"| {a} / {b} | {qm:.3f} | {min(qr):.3f}–{max(qr):.3f} (median {statistics.median(qr):.3f}) | {cm:.3f} | {min(cr):.3f}–{max(cr):.3f} (median {statistics.median(cr):.3f}) | {am:+.2f} |")
    return "\n".join(out)

def inprocess_table(d):
    vals = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for side in ('before', 'after'):
        for f in sorted(glob.glob(f"{d}/{side}-r*.txt")):
            for line in open(f):
                m = re.match(r'^Benchmark(\S+?)-2\s+\d+\s+(.*)$', line)
                if not m:
                    continue
                name, rest = m.groups()
                toks = rest.split()
                for i in range(0, len(toks) - 1, 2):
                    vals[name][toks[i + 1]][side].append(float(toks[i]))
    out = ["| benchmark | ns/op before median [min–max] | ns/op after median [min–max] | after/before | B/op before → after | allocs/op before → after | allocs/row before → after |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for name, units in vals.items():
        nb = med_spread(units['ns/op']['before']); na = med_spread(units['ns/op']['after'])
        def ba(u, nd=0):
            if u not in units: return '–'
            b = statistics.median(units[u]['before']); a = statistics.median(units[u]['after'])
            sb = '' if min(units[u]['before']) == max(units[u]['before']) else f" ({min(units[u]['before']):.{nd}f}–{max(units[u]['before']):.{nd}f})"
            sa = '' if min(units[u]['after']) == max(units[u]['after']) else f" ({min(units[u]['after']):.{nd}f}–{max(units[u]['after']):.{nd}f})"
            return f"{b:.{nd}f}{sb} → {a:.{nd}f}{sa}"
        out.append(f"| {name} | {fmt(*nb, nd=0)} | {fmt(*na, nd=0)} | {na[0]/nb[0]:.3f} | {ba('B/op')} | {ba('allocs/op')} | {ba('allocs/row', 4)} |")
    return "\n".join(out)

if __name__ == '__main__':
    kind = sys.argv[1]
    if kind == 'inprocess':
        print(inprocess_table(sys.argv[2]))
    else:
        pairs = [tuple(p.split(':')) for p in sys.argv[3:]]
        print(sysbench_table(sys.argv[2], pairs))
