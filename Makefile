# shardgate developer targets. CI runs `make test` (see .ci/run).
#
#   make build       bin/proxy, bin/shardgate (the operator's command line) and bin/relay
#   make run         local MariaDB on 127.0.0.1:3307/3308 (bench/cluster.sh), then the proxy in the foreground
#   make test        deps, gofmt, vet, race tests (integration tests start their own MariaDB), fuzz, end-to-end smoke,
#                    README.md's quick start as written (scripts/quickstart.sh, own servers on other ports, ~40 s),
#                    MariaDB's own test suite (a subset: mtr/subset.txt) directly and through the proxy
#   make test-mtr    MariaDB's suite main in full, text and binary protocols, directly and through the proxy (mtr/run.sh)
#   make test-short  unit tests only, no MariaDB needed
#   make fuzz        every Fuzz* target for FUZZTIME (default 5s), then the verify's property test for VERIFY_ROUNDS
#                    random schemas (default 300, about a minute), then the session fuzzer (TestIsolationFuzz: two
#                    clients on one pooled connection) for ISOFUZZTIME (default 20s; ISOFUZZFLAGS=-isolationfuzz.known
#                    also fails on the known open findings)
#   make bench       the load-test ladder (bench/run.sh), then transaction_mode xa against multi (bench/xa.sh)
#   make bench-compare  before/after in one interleaved run: oltp_point_select, text protocol, 16 threads, 5 rounds;
#                    direct, relay, the working tree's proxy and BASELINE's (default 70f9b6b), paired ratios (~9 min)
#   make bench-conns 5,000 idle clients and 100,000 connect-query-quit cycles against the proxy (bench/conns.sh)
#   make bench-hostile  the proxy's RSS under hostile clients: stalled compressed floods, compressed clients reading
#                    large results, 1,000 silent sockets, prepared-statement floods (bench/hostile.sh; own MariaDB; ~2 min)
#   make bench-xa    transaction_mode xa against multi: two-node and one-node write transactions, tps ratio and CPU
#                    (bench/xa.sh; about 6.5 minutes)
#   make bench-deadlock  sysbench oltp_read_write, 8 and 16 threads, through the sharded proxy: the deadlock detector
#                    against no detector with the 50 s and a 3 s lock wait timeout (bench/deadlock.sh; own servers in
#                    var/bench-deadlock, stopped at the end; ROUNDS=3: about 13 minutes)
#   make bench-move  online resharding: copy sweep and anchors, catch-up under sysbench, verify, cutover pause
#                    (bench/move.sh; own servers in var/bench-move, stopped at the end; about 7 minutes)
#   make bench-fleet fleet mode against one file on point selects (bench/run.sh's ladder plus a fleet proxy on a real
#                    etcd, interleaved), and the propagation time of 20 topology changes to three proxies
#                    (bench/fleet.sh; about 8 minutes)
#   make bench-cutover  a fleet-wide cutover (2 to 8 subtables over 3 nodes) with 1 proxy, 3 proxies, 3 with one frozen:
#                    pause and point-select p50/p99/max across it (bench/cutover.sh; own servers and etcd; about 3 minutes)
#   make bench-kafka the Kafka sink (issue 38): canal's table (mixed DML, batch inserts; topics x partitions; Debezium
#                    and json), the stage funnel and the franz-go anchor, partitions x consumer-group scaling, lag under
#                    sysbench through the proxy (bench/kafka.sh; own servers and broker, stopped at the end; about 4 minutes)
#   make bench-cache the result cache (issue 39): point selects, and with 5 % updates, against direct, relay, the proxy
#                    without cache and MariaDB's query cache; hit ratio from /stats (bench/cache.sh; about 10 minutes)
#   make clean       remove bin/ (var/, the local MariaDB data, stays; bench/cluster.sh stop stops the servers)

GO       ?= go
FUZZTIME ?= 5s

SHELL       := bash
.SHELLFLAGS := -eu -o pipefail -c

.PHONY: all build run test test-short test-mtr fuzz bench bench-compare bench-conns bench-hostile bench-stream bench-move bench-xa clean bench-deadlock bench-fleet bench-cutover bench-kafka bench-cache

all: build

build:  # -buildvcs=auto: the commit in -version/version even where GOFLAGS turns stamping off
	$(GO) build -buildvcs=auto -o bin/proxy ./cmd/proxy
	$(GO) build -buildvcs=auto -o bin/shardgate ./cmd/shardgate
	$(GO) build -o bin/relay ./bench/relay

# Ctrl-C stops the proxy only; the MariaDB servers keep running until `bench/cluster.sh stop`.
run:
	scripts/deps.sh mariadb openssl
	bench/cluster.sh start
	$(MAKE) build
	scripts/dev-cert.sh bin/tls
	exec bin/proxy -config etc/ks.yaml -tls-cert bin/tls/cert.pem -tls-key bin/tls/key.pem

test:
	scripts/deps.sh mariadb sysbench mtr clients chromium etcd kafka
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [[ -n $$unformatted ]]; then echo "gofmt would change:" $$unformatted >&2; exit 1; fi
	$(GO) mod tidy -diff
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 25m ./...
	$(MAKE) fuzz
	bench/smoke.sh
	scripts/quickstart.sh
	mtr/run.sh

test-mtr:
	mtr/run.sh --full

test-short:
	$(GO) test -short ./...

# Go before 1.27 can end a -fuzztime run with its own "context deadline exceeded" and no failing input (a race in
# the fuzzing coordinator, golang/go#75804): such a run is retried, up to three tries; any other failure fails.
# `go test -list` prints a package's matching names, then "ok <import path> <time>"; go test -fuzz takes one
# target in one package at a time. The verify's property test (random schemas, every single-byte change) needs
# MariaDB, which -fuzz runs do not start: it runs last as a test, with many more rounds than make test's.
fuzz:
	tmp=$$(mktemp); \
	$(GO) test -list '^Fuzz' ./... \
	| awk '/^Fuzz/ { names[n++] = $$1; next } /^ok / { for (i = 0; i < n; i++) print $$2, names[i] } { n = 0 }' \
	| while read -r pkg name; do \
		echo "fuzz: $$pkg $$name for $(FUZZTIME)"; \
		for try in 1 2 3; do \
			if $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) "$$pkg" </dev/null >"$$tmp" 2>&1; then \
				cat "$$tmp"; break; \
			fi; \
			cat "$$tmp"; \
			if [ $$try != 3 ] && grep -q 'context deadline exceeded' "$$tmp" && ! grep -q 'Failing input' "$$tmp"; then \
				echo "fuzz: $$name: the fuzzing engine's own deadline error (no failing input, golang/go#75804), retrying"; \
				continue; \
			fi; \
			rm -f "$$tmp"; exit 1; \
		done; \
	done; rm -f "$$tmp"
	$(GO) test -count=1 -run '^TestVerifyProperty$$' ./move -verify.rounds=$${VERIFY_ROUNDS:-300}
	$(GO) test -count=1 -run '^TestIsolationFuzz$$' ./proxy/server -isolationfuzz=$${ISOFUZZTIME:-20s} $${ISOFUZZFLAGS:-}

# bench/xa.sh reads the same knobs as bench/run.sh (THREADS, ROUNDS, DURATION, ...); an OUT of your own gets its
# results in $OUT/xa, beside (not over) the ladder's.
bench:
	bench/run.sh
	OUT=$${OUT:+$$OUT/xa} bench/xa.sh
	OUT=$${OUT:+$$OUT/deadlock} bench/deadlock.sh
	OUT=$${OUT:+$$OUT/fleet} bench/fleet.sh

bench-fleet:
	bench/fleet.sh

bench-cutover:
	bench/cutover.sh

# BASELINE, ROUNDS, DURATION, WARMUP and OUT may be given; the rest is fixed so that runs compare with each other.
bench-compare:
	BASELINE=$${BASELINE:-70f9b6b} ROUNDS=$${ROUNDS:-5} TESTS=oltp_point_select MODES=disable THREADS=16 \
		PATHS="direct relay proxy" SPLIT=0 SHARDED_CONFIG= bench/run.sh

bench-conns:
	bench/conns.sh

bench-hostile:
	bench/hostile.sh

bench-stream:
	bench/stream.sh

bench-move:
	bench/move.sh

bench-kafka:
	bench/kafka.sh

bench-cache:
	bench/cache.sh

bench-xa:
	bench/xa.sh

bench-deadlock:
	bench/deadlock.sh

clean:
	rm -rf bin
