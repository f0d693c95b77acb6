"""Per run: CPU seconds used by other processes during the run's 10 s, from cpu-samples.txt (2 s samples; a sample
counts if its interval end falls inside [ts - duration + 1, ts]). foreign = attributed to non-benchmark pids;
unacc = total busy - bench - foreign (short-lived processes of either kind). Prints per-run rows and per-round sums.
python3 foreign.py results.csv [reversed/results.csv]"""
import csv, sys, datetime
from collections import defaultdict
S = []
for line in open('cpu-samples.txt'):
    p = line.split()
    if p[0] == 'time':
        continue
    t = datetime.datetime.strptime('2026-11-24 ' + p[0], '%Y-%m-%d %H:%M:%S').replace(tzinfo=datetime.timezone.utc).timestamp()
    S.append((t, float(p[1]), float(p[2]), float(p[3])))
perround = defaultdict(lambda: [0.0, 0.0, 0])
for f, tag in zip(sys.argv[1:], ('', '-rev')):
    for r in csv.DictReader(open(f)):
        ts = int(r['ts']); d = int(r['duration_s'])
        w = [s for s in S if ts - d + 1 <= s[0] <= ts]
        fo = sum(s[3] for s in w); un = sum(s[1] - s[2] - s[3] for s in w)
        key = (r['mode'] + tag, int(r['round']))
        perround[key][0] += fo; perround[key][1] += un; perround[key][2] += len(w)
        print(f"{r['mode']}{tag} r{r['round']} {r['path']}: foreign {fo:.2f}s unacc {un:.2f}s ({len(w)} samples)")
print('\nper round (sum over the round\'s runs): foreign s, unaccounted s')
for k, (fo, un, n) in sorted(perround.items()):
    print(f'{k[0]} r{k[1]}: ' + (f'{fo:.1f} {un:.1f} ({n} samples)' if n else 'n/a (sampler not yet running)'))
