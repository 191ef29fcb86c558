# locklab. `make test` runs every check against real redis-server processes
# the tests start on free ports; `make demo` runs the whole comparison on a
# local cluster (3 Redis nodes, 2 replicas, nginx) and stops it again.
GO ?= go
# The local cluster's settings, read by the cluster command (cmd/cluster).
LOCK ?= v1
PORT ?= 80
REPLICAS ?= 2
RUN_DIR ?= $(CURDIR)/.run
export LOCK PORT REPLICAS RUN_DIR

CLUSTER := $(GO) run ./cmd/cluster
URL := http://localhost:$(PORT)
REPORT := $(CURDIR)/report.html

.PHONY: test-e2e-soak mutations e2e-swarm lab lab-screenshot lesson-screenshot bench-lab fuzz stress test-busy bench bench-scale bench-docs bench-guards scenarios scenarios-compose nemesis scenarios-docs docs test test-e2e e2e-compose images-offline vet build check-tools up down status demo bench-loadtest families clean

test: check-tools vet
	$(GO) test -race ./...

# The end-to-end suite: starts the local cluster (nginx on a free port) and
# asserts the oversell three runs in a row. Needs redis-server and nginx.
# Its tests bound themselves; go test's own 10-minute default is not theirs:
# a fresh 2-core machine took 597 s before the last test (CI, stop 36).
test-e2e: check-tools
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "chromium is not installed; the lab's browser test drives it (headless)."; \
	  echo "Install it: sudo apt-get install chromium (Debian/Ubuntu)"; exit 1; }
	$(GO) test -tags e2e -count=1 -timeout 40m -v ./e2e/

# The scenario matrix three times in a row on its fault cluster (CI runs it
# once, in make test-e2e): by hand, to catch a cell that passes by luck.
test-e2e-soak: check-tools
	LOCKLAB_SCENARIO_RUNS=3 $(GO) test -tags e2e -count=1 -timeout 60m -v -run '^TestScenarios$$' ./e2e/

# The docs' pictures of the lab, the browser test's screenshots on the local
# cluster it starts: after its v2 run (docs/lab.png, the README's), v6's
# slow holder without and with fencing, and a fault left for a person.
lab-screenshot:
	@d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	LAB_SCREENSHOTS=$$d $(GO) test -tags e2e -count=1 -run '^TestLab$$' ./e2e/ && \
	cp $$d/view-runs-1280.png docs/lab.png && cp $$d/lab-5-slow-holder.png docs/lab-slow-holder.png && \
	cp $$d/lab-5-slow-holder+fence.png docs/lab-slow-holder-fence.png && cp $$d/lab-7-not-undone.png docs/lab-not-undone.png && \
	echo "docs/lab.png, docs/lab-slow-holder.png, docs/lab-slow-holder-fence.png, docs/lab-not-undone.png written"

# The step-through's pictures (docs/lesson-*.png): the browser test's, on
# the local cluster it starts as make up does, each story's ending at 1280
# and 390 px (the frozen holder's and Redlock's restart too).
lesson-screenshot:
	@d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	LAB_SCREENSHOTS=$$d $(GO) test -tags e2e -count=1 -run '^(TestLessonStepThrough|TestLessonFrozenHolder|TestLessonRedlockRestart)$$' ./e2e/ && \
	cp $$d/lesson-*.png docs/ && echo "docs/lesson-*.png written"

# The generated parts of README.md and docs/ (flag tables, endpoints, the
# scenario list, the versions and their code), rewritten from the code;
# make test fails while one is out of date. The measured tables have their
# own targets, which measure: bench-docs and scenarios-docs.
docs:
	LOCKLAB_DOCS=update $(GO) test -count=1 -run '^TestDocs$$' ./internal/versions ./internal/server ./internal/scenario ./cmd/inventory ./cmd/lab ./cmd/cluster ./loadtest ./bench

# The lab against the command line, on a local cluster it starts: v6 run by
# the lab with its page open, and by the load test at the same settings, in
# turns; it reports lab/cli (the target: 0.95 or more) and the page's first
# contentful paint. A measurement, not a check: run it by hand.
bench-lab: check-tools
	$(GO) test -tags e2e -count=1 -run '^$$' -bench '^BenchmarkLab$$' -benchtime 1x -timeout 20m -v ./e2e/

# Each fuzz test for FUZZTIME inputs: the stock values (Go and Lua agree),
# PUT /stock's body, /sale's query and request id, the flags and environment.
# A count, not a duration: Go 1.26's coordinator can report its own -fuzztime
# deadline as a failure, a bare "context deadline exceeded" with no failing
# input (go.dev/issue/75804, fixed in Go 1.27; CI on 5f2e707, and again on
# 885689b: FuzzSaleQuery at 30.17 s, 96,754 inputs run, none failing); a
# count has no deadline to race. 100,000 inputs took 25-31 s a test here. A
# failing input is saved under the package's testdata/fuzz, as found: none is
# minimized (-fuzzminimizetime 0: minimizing stopped FuzzSaleQuery for up to
# 10 s, each call an HTTP request and Redis commands).
FUZZTIME ?= 100000x
FUZZ := ./internal/sale:FuzzStockValues ./internal/server:FuzzSetStock ./internal/server:FuzzSaleQuery ./cmd/inventory:FuzzConfig
fuzz: check-tools
	@log=$$(mktemp); trap 'rm -f $$log' EXIT; for f in $(FUZZ); do \
	  echo "fuzz: $${f#*:} ($${f%%:*}, $(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$${f#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0 "$${f%%:*}" >$$log 2>&1 || \
	    { grep -v '^redis:' $$log | tail -30; exit 1; }; \
	  grep -o 'execs: [0-9]*' $$log | tail -1 | sed 's/execs: /  inputs run: /'; \
	done

# The timing-sensitive packages 20 times over with the race detector while
# every core is kept busy by spinners: what a loaded CI machine does to them.
STRESS_PKGS := ./internal/locks/... ./internal/sale ./internal/server ./internal/history ./internal/checker ./cmd/inventory
stress: check-tools
	@spin=""; for _ in $$(seq $$(nproc)); do (while :; do :; done) & spin="$$spin $$!"; done; \
	trap 'kill $$spin 2>/dev/null' EXIT; \
	$(GO) test -race -count=20 $(STRESS_PKGS)

# make test RUNS times in a row (no cached results) with every core kept
# busy by spinners: it must pass every time.
RUNS ?= 10
test-busy: check-tools
	@spin=""; for _ in $$(seq $$(nproc)); do (while :; do :; done) & spin="$$spin $$!"; done; \
	log=$$(mktemp); trap 'kill $$spin 2>/dev/null; rm -f $$log' EXIT; \
	for i in $$(seq $(RUNS)); do \
	  start=$$(date +%s); \
	  GOFLAGS=-count=1 $(MAKE) --no-print-directory test >$$log 2>&1 || \
	    { grep -v '^redis:' $$log | grep -v '^ok' | tail -40; echo "test-busy: run $$i of $(RUNS) FAILED"; exit 1; }; \
	  echo "test-busy: run $$i of $(RUNS) passed in $$(( $$(date +%s) - start ))s"; \
	done

vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/

build:
	$(GO) build -o bin/inventory ./cmd/inventory

check-tools:
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "redis-server is not installed; the tests start real Redis servers."; \
	  echo "Install it: sudo apt-get install redis-server (Debian/Ubuntu), brew install redis (macOS)"; \
	  exit 1; }
	@command -v etcd >/dev/null 2>&1 || { \
	  echo "etcd is not installed; the tests of the etcd lock start real etcd clusters."; \
	  echo "Install it: sudo apt-get install etcd-server (Debian/Ubuntu), brew install etcd (macOS)"; \
	  exit 1; }
	@command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || { \
	  echo "MariaDB is not installed; the tests of the db lock start real MariaDB servers."; \
	  echo "Install it: sudo apt-get install mariadb-server (Debian/Ubuntu), brew install mariadb (macOS)"; \
	  exit 1; }
	@[ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1 || { \
	  echo "ZooKeeper is not installed; the tests of the zk lock start real ZooKeeper ensembles."; \
	  echo "Install it: sudo apt-get install zookeeper (Debian/Ubuntu: its jar in /usr/share/java, and a JRE)"; \
	  exit 1; }

up:
	@echo "make up: compiling the cluster command, then starting the cluster (the first time: a minute or two, more if apt-get installs a package)"
	@$(CLUSTER) up

# The lab with every fault cell runnable: the scenarios' cluster (fault
# hooks on, a 1 s lease, the fault proxies), left running; make down stops it.
lab:
	@$(SCENARIO_ENV) $(CLUSTER) up

down:
	@$(CLUSTER) down

status:
	@$(CLUSTER) status

# up, the comparison over every version, the report, down: whatever happens.
demo:
	@$(CLUSTER) up
	@status=0; \
	$(GO) run ./loadtest -url $(URL)/sale -lock all -wait all -out $(REPORT) \
	  -note "Local cluster (make up): $(REPLICAS) replicas behind nginx, three independent redis-server nodes (no persistence), three etcd members, three ZooKeeper members, one MariaDB." \
	  || status=$$?; \
	$(CLUSTER) down; \
	echo "report: $(REPORT)"; \
	echo "the lab: make up, then open $(URL)/ in a browser"; \
	exit $$status

# The Docker Compose stack end to end with no registry: offline images, up,
# load test from inside the network, one Redis node stopped, down. With
# Compose v2 (built by deploy/install-compose-v2.sh when missing): the whole
# run with `up -d --wait`, a quick one with plain `up -d`; with Debian's v1
# (which has no --wait), a quick one through deploy/compose.sh (the README's
# command for machines without the v2 plugin), scaled to three and back, with
# port 80 published on every interface (BIND=0.0.0.0).
e2e-compose:
	@docker compose version >/dev/null 2>&1 || bash deploy/install-compose-v2.sh
	@COMPOSE="docker compose" UP_FLAGS=--wait bash deploy/compose-e2e.sh
	@COMPOSE="docker compose" QUICK=1 bash deploy/compose-e2e.sh
	@if command -v docker-compose >/dev/null 2>&1; then \
	  COMPOSE=deploy/compose.sh LOCKLAB_COMPOSE=docker-compose QUICK=1 SCALE=1 BIND=0.0.0.0 bash deploy/compose-e2e.sh; \
	else echo "e2e-compose: SKIPPED the v1 run: no docker-compose"; fi

# deploy/stack.yml on a one-node Docker Swarm, end to end (offline images):
# made a swarm on loopback if the engine is in none, and left again after;
# the load test for v1, v2, v6 and redlock, scaled to four replicas and run
# again, a rolling update under load; everything removed. Skips, saying why,
# where the engine cannot run a swarm.
e2e-swarm:
	@bash deploy/swarm-e2e.sh

# Every image the Compose stack needs, built with no registry.
images-offline:
	@bash deploy/offline/build-images.sh

# Each version's flaw on demand: a cluster with the fault hooks on (-chaos),
# the fault proxies between replicas and Redis nodes (FAULTS=1), a 1 s lease
# so that "longer than the lease" takes seconds, and a 5 s acquire deadline;
# the scenarios; down, whatever happens. Then the second pass, for the
# scenarios that need Redis Sentinel watching the stock's node (SENTINEL=1,
# failover-sentinel): a cluster of its own, since on the first one Sentinel
# would fail the node over under node-down and bypass the replicas' fault
# proxies, with a 15 s lease, longer than Sentinel's failover takes. The
# hooks' admin token is a new random one each up, which the load test reads
# from the cluster's private state file: no token on any command line, where
# every user could read it.
SCENARIO ?= all
SCENARIO_ENV := FAULTS=1 INVENTORY_CHAOS=true INVENTORY_TTL=1s INVENTORY_ACQUIRE_TIMEOUT=5s
SENTINEL_SCENARIO_ENV := SENTINEL=1 FAULTS=1 INVENTORY_CHAOS=true INVENTORY_TTL=15s INVENTORY_ACQUIRE_TIMEOUT=5s
scenarios:
	@status=0; \
	case "$(SCENARIO)" in all) passes="first second";; *sentinel*) passes=second;; *) passes=first;; esac; \
	for pass in $$passes; do \
	  settings="$(SCENARIO_ENV)"; \
	  if [ $$pass = second ]; then settings="$(SENTINEL_SCENARIO_ENV)"; \
	    echo "scenarios: the second pass, on a cluster whose stock node Redis Sentinel watches"; fi; \
	  env $$settings $(CLUSTER) up || { status=1; break; }; \
	  $(GO) run ./loadtest -url $(URL)/sale -run-dir $(RUN_DIR) -scenario $(SCENARIO) $(SCENARIO_FLAGS) || status=1; \
	  $(CLUSTER) down; \
	done; \
	exit $$status

# The scenarios against the Docker Compose stack (offline images; OFFLINE=0:
# the registry's): up with deploy/docker-compose.scenarios.yml, every
# scenario that makes sense there, down, whatever happens.
scenarios-compose:
	@SCENARIO=$(SCENARIO) SCENARIO_FLAGS="$(SCENARIO_FLAGS)" bash deploy/compose-scenarios.sh

# A seeded schedule of faults against a steady load, judged by the history
# checker: the scenarios' cluster, with 20 ms of business time per sale (so
# that a paused replica is often caught holding the lock), then down.
NEMESIS_FLAGS ?= -duration 60s -seed 2 -lock v7,v8,redlock
nemesis:
	@$(SCENARIO_ENV) WORK=20ms $(CLUSTER) up
	@status=0; \
	$(GO) run ./loadtest -url $(URL)/sale -run-dir $(RUN_DIR) -nemesis $(NEMESIS_FLAGS) || status=$$?; \
	$(CLUSTER) down; \
	exit $$status

# Each cell expected to hold, run again with its fix switched off (the
# off= hook, the version before the fix): each must show its flaw. The same
# two passes as make scenarios; the table goes to docs/evidence.md.
mutations:
	@$(MAKE) --no-print-directory scenarios SCENARIO=$(SCENARIO) SCENARIO_FLAGS="-mutate -doc $(CURDIR)/docs/evidence.md $(SCENARIO_FLAGS)"

# The same as make scenarios, writing the observed matrix into docs/faults.md.

scenarios-docs:
	@$(MAKE) --no-print-directory scenarios SCENARIO=all SCENARIO_FLAGS="-doc $(CURDIR)/docs/faults.md"

# Each guard's uncontended acquire and release against a real Redis, for
# benchstat: make bench-guards > old.txt; (change); make bench-guards > new.txt
bench-guards: check-tools
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./internal/locks/...

# Is the load test fast enough not to be the bottleneck? Its requests/s
# against wrk's, both on GET /healthz through nginx, in one run.
bench-loadtest:
	@bash deploy/local/bench-loadtest.sh

# The four families of seed 004 (Redis: v6 and redlock; etcd; ZooKeeper; the
# database) on the same load, with the requests each lock's servers handled
# per sale, read from their own counters (docs/families.md).
families:
	@PORT=$(PORT) RUN_DIR=$(RUN_DIR) bash deploy/local/families.sh

# Every version against the machine's ceilings, in one run on a local cluster
# started for it with no business time (-work 0); the targets of issue 6;
# results in $(BENCH_JSON); down, whatever happens.
BENCH_JSON ?= $(CURDIR)/bench.json
BENCH_REPORT ?= $(CURDIR)/bench.html
BENCH_FLAGS ?=
bench:
	@WORK=0 $(CLUSTER) up
	@status=0; \
	$(GO) run ./bench -url $(URL)/sale -run-dir $(RUN_DIR) -json $(BENCH_JSON) -report $(BENCH_REPORT) $(BENCH_FLAGS) || status=$$?; \
	$(CLUSTER) down; \
	exit $$status

# The scaling curve (issue 29): the local cluster started with -work 0 at 1,
# 2, 4 and 8 replicas in turn (each stopped after), none, v6 (poll, notify,
# handoff), redlock, etcd and atomic at concurrency 1 to 256; sales/s, p99,
# Redis commands and round trips per sale, into bench-scale.json, the chart
# and docs/performance.md. About 5 minutes.
bench-scale:
	$(GO) run ./bench scale -run-dir $(RUN_DIR) -port $(PORT) -json $(CURDIR)/bench-scale.json -chart $(CURDIR)/docs/bench-scale.svg -doc $(CURDIR)/docs/performance.md $(SCALE_FLAGS)

# The same, writing the table into docs/performance.md.
bench-docs:
	@$(MAKE) --no-print-directory bench BENCH_FLAGS="$(BENCH_FLAGS) -doc $(CURDIR)/docs/performance.md -chart $(CURDIR)/docs/bench-latency.svg"

# Removes what make up and make build created, and nothing else (RUN_DIR may
# point at a folder of the user's own).
clean:
	@$(CLUSTER) clean
	rm -f bin/inventory $(REPORT)
	@rmdir bin 2>/dev/null || true
