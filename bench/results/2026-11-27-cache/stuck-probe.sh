#!/usr/bin/env bash
# The mixed workload's 0 % hit ratio, reduced (2026-11-27, working tree at 8572981 + the lead's binary-protocol edits):
# with bin/proxy -config etc/ks-cache.yaml running on the bench cluster, a fill followed by an UPDATE on the same
# node leaves the session never looked up again (hits and misses stop counting for it).
st() { curl -s 127.0.0.1:9787/stats | jq -c '.cache|{Hits,Misses,Fills,Bypassed}'; }
q() { mariadb --no-defaults -h127.0.0.1 -P9687 -ushardgate -pshardgate sbtest -N -B -e "$1"; }
st
# 501 and 505 both on node1 (id % 4 = 1): fill, UPDATE, then three SELECTs that should hit, hit, miss.
q "SELECT c FROM sbtest1 WHERE id=501; UPDATE sbtest1 SET k=k+1 WHERE id=505; SELECT c FROM sbtest1 WHERE id=501; SELECT c FROM sbtest1 WHERE id=501; SELECT c FROM sbtest1 WHERE id=601" >/dev/null
st # got: Hits 0, Misses 2, Fills 1 (the last three statements were not looked up)
# With the UPDATE on the other node (id 502, node2) the same session goes on hitting: Hits 2, Misses 3, Fills 2.
