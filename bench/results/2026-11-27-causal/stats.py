import sys, re, statistics as st
from collections import defaultdict
d=defaultdict(lambda: defaultdict(list))
order=[]
for line in open(sys.argv[1]):
    if not line.startswith('Bench'): continue
    f=line.split()
    name=f[0].replace('BenchmarkCausalRead/','').rsplit('-',1)[0]
    if name not in order: order.append(name)
    for v,u in zip(f[2::2], f[3::2]):
        d[name][u].append(float(v))
def q(xs,p):
    xs=sorted(xs); k=(len(xs)-1)*p; f=int(k); c=min(f+1,len(xs)-1); return xs[f]+(xs[c]-xs[f])*(k-f)
print("| case | n | ns/op median | IQR (p25-p75) | min-max | allocs/op | B/op | master SELECTs/op | replica SELECTs/op |")
print("|---|---|---|---|---|---|---|---|---|")
for n in order:
    x=d[n]['ns/op']
    print(f"| {n} | {len(x)} | {st.median(x)/1000:.0f} µs | {q(x,.25)/1000:.0f}-{q(x,.75)/1000:.0f} | {min(x)/1000:.0f}-{max(x)/1000:.0f} | {st.median(d[n]['allocs/op']):.0f} | {st.median(d[n]['B/op']):.0f} | {st.median(d[n]['master/op']):.3f} | {st.median(d[n]['replica/op']):.3f} |")
# paired per-round differences vs session for same load
rounds=len(d[order[0]]['ns/op'])
print()
for load in ['idle','writes']:
    base=d[load+'/session']['ns/op']
    for n in order:
        if not n.startswith(load+'/') or n.endswith('/session'): continue
        diffs=[a-b for a,b in zip(d[n]['ns/op'],base)]
        ratios=[a/b for a,b in zip(d[n]['ns/op'],base)]
        print(f"{n} - {load}/session per round: median {st.median(diffs)/1000:+.0f} µs (IQR {q(diffs,.25)/1000:+.0f} to {q(diffs,.75)/1000:+.0f}), ratio median {st.median(ratios):.2f} (IQR {q(ratios,.25):.2f}-{q(ratios,.75):.2f})")
