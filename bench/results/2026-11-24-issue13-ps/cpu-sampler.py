"""Every 2 s: CPU seconds used in the interval by processes that are not this benchmark's (foreign), by this
benchmark's (sysbench, /tmp/b14-bins proxies and relay, bin/relay in /tmp/b14-ea2e672, the 3307/3308 mariadbd
of /tmp/b14-ea2e672/var/mariadb), and the machine's total busy time from /proc/stat. Only pids alive at two
consecutive samples are attributed; short-lived processes show up only in total - bench - foreign."""
import os, time, sys
HZ = os.sysconf('SC_CLK_TCK')
def procs():
    d = {}
    for p in os.listdir('/proc'):
        if not p.isdigit():
            continue
        try:
            st = open(f'/proc/{p}/stat').read()
            cmd = open(f'/proc/{p}/cmdline').read().replace('\0', ' ')[:120]
        except OSError:
            continue
        comm = st[st.index('(') + 1:st.rindex(')')]
        f = st[st.rindex(')') + 2:].split()
        if f[1] == '2' or p == '2':  # kernel threads (ppid 2)
            continue
        d[int(p)] = (int(f[11]) + int(f[12]), comm, cmd)
    return d
def busy():
    f = [int(x) for x in open('/proc/stat').readline().split()[1:]]
    return sum(f) - f[3] - f[4]
def bench(comm, cmd):
    return (comm == 'sysbench' or '/tmp/b14' in cmd or 'b14-' in cmd or 'issue13-ps' in cmd
            or comm in ('proxy-5180431', 'proxy-cd5ff00', 'proxy-ea2e672', 'relay') and 'mtr' not in cmd)
prev = procs(); pb = busy(); me = os.getpid()
print('time total_busy_s bench_s foreign_s top_foreign', flush=True)
while True:
    time.sleep(2)
    cur = procs(); cb = busy()
    b = f = 0; tops = {}
    for pid, (t, comm, cmd) in cur.items():
        if pid == me or pid not in prev:
            continue
        dt = t - prev[pid][0]
        if dt <= 0:
            continue
        if bench(comm, cmd):
            b += dt
        else:
            f += dt; tops[comm] = tops.get(comm, 0) + dt
    top = ';'.join(f'{k}={v / HZ:.2f}' for k, v in sorted(tops.items(), key=lambda x: -x[1])[:4])
    print(f'{time.strftime("%H:%M:%S", time.gmtime())} {(cb - pb) / HZ:.2f} {b / HZ:.2f} {f / HZ:.2f} {top}', flush=True)
    prev = cur; pb = cb
