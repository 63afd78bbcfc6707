# tidegauge developer tasks. `make demo` and `make test` are the two set-up commands in README.md.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck bench bench-instance bench-fleet bench-memory bench-scan-shs differential differential-flink differential-joins fuzz system-deps clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	# a full Flink distribution for the integration tests (the PyPI wheels' own deps are not needed)
	$(BIN)/pip install -q --no-deps apache-flink==2.3.0 apache-flink-libraries==2.3.0
	touch $(STAMP)

## The demo installs only what tidegauge itself needs (no `dev` extra: no PySpark, no mypy, no Java).
DEMO_STAMP := $(VENV)/.installed-demo
$(DEMO_STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $(DEMO_STAMP)

## Runs `tidegauge demo`: the daemon, the dashboard, /metrics and a webhook receiver over a simulated Spark
## fleet with injected faults (Ctrl-C stops it; `make demo DEMO_ARGS="--duration 120s"` runs unattended).
DEMO_ARGS ?=
demo: $(DEMO_STAMP)
	$(BIN)/tidegauge demo $(DEMO_ARGS)

## Installs everything the tests need (Python deps, Java 17, PostgreSQL, ...) and runs the whole suite; a
## test whose dependency is missing fails here (--require-all, tests/dependencies.py), it never skips.
test: $(STAMP) system-deps
	$(BIN)/ruff check monitor collectors rules dashboard tests
	$(BIN)/lint-imports
	$(BIN)/mypy
	env -u PYTEST_ADDOPTS -u PYTEST_PLUGINS $(BIN)/pytest --require-all

system-deps:
	bash .ci/system-deps.sh

## ruff, and the layers of DESIGN.md as import-linter contracts (pyproject.toml [tool.importlinter]).
lint: $(STAMP)
	$(BIN)/ruff check monitor collectors rules dashboard tests
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

## Benchmarks (not part of the test suite); figures go into the issue notes.
bench: $(STAMP)
	$(BIN)/python -m tests.benchmarks.run_all

## One instance (issue 16): poll storage per file, then one daemon with QUERIES simulated Spark queries at 10 s
## triggers on SQLite and PostgreSQL (both also run by `make bench`, with their defaults).
QUERIES ?= 2500
bench-instance: $(STAMP)
	$(BIN)/python -m tests.benchmarks.bench_poll_store --queries 500
	$(BIN)/python -m tests.benchmarks.bench_one_instance --queries $(QUERIES) --history 12 --rounds 4

## A fleet (issue 16): FLEET_QUERIES simulated Spark queries at 10 s triggers over 12 targets on 1, 2 and 3
## `tidegauge run` instances sharing one PostgreSQL (CPU per instance and of PostgreSQL, statements and rows
## per second, time from a fault to its notification). FLEET_QUERIES: comma-separated sizes.
FLEET_QUERIES ?= 1000
bench-fleet: $(STAMP)
	$(BIN)/python -m tests.benchmarks.bench_fleet --queries $(FLEET_QUERIES) --instances 1,2,3 --history 6 --rounds 5

## Memory (issue 16): the in-memory histories of MEMORY_JOBS Spark queries x 1 h of 10 s triggers (recorded real
## samples through the store loader): tracemalloc bytes per sample by allocation site, RSS growth.
MEMORY_JOBS ?= 10000
bench-memory: $(STAMP)
	$(BIN)/python -m tests.benchmarks.bench_history_memory --jobs $(MEMORY_JOBS)

## scan against Spark's History Server (issue 16): one streaming-only event log of SCAN_BATCHES progress events
## (~1.6 KB each), `tidegauge scan` and the History Server's replay timed alternately, 3 runs (needs java).
SCAN_BATCHES ?= 100000
bench-scan-shs: $(STAMP)
	nice -n 10 $(BIN)/python -m tests.benchmarks.bench_scan_vs_history_server --batches $(SCAN_BATCHES) --runs 3

## Fuzzing (not part of `make test`): COUNT mutated recorded inputs per parser family under atheris (libFuzzer),
## JOBS families at once (one process each); FAMILIES: comma-separated, default all; SECONDS: stop each family
## after that long; REPORT: also write the figures as JSON. Crashing inputs go to tests/fuzz/corpus/<family>/,
## which `make test` replays (tests/unit/test_fuzz_corpus.py).
COUNT ?= 1000000
SEED ?= 0
JOBS ?= 2
FAMILIES ?= eventlog,progress,listener,prometheus,config,whatif,flink_rest,flink_reporter,kafka_exporter,kminion,burrow
fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz.run --families $(FAMILIES) --count $(COUNT) --seed $(SEED) --jobs $(JOBS) \
		$(if $(SECONDS),--seconds $(SECONDS)) $(if $(REPORT),--report $(REPORT))

## Differential tests: N seeded scenarios (seeds S..S+N-1) through real PySpark and the reference engine.
N ?= 200
S ?= 0
differential: $(STAMP) system-deps
	$(BIN)/python -m tests.differential.run --count $(N) --seed-start $(S)

## Chained stateful operators (agg -> agg, dedup -> agg): N seeded chain scenarios through real PySpark.
.PHONY: differential-chains
differential-chains: $(STAMP) system-deps
	$(BIN)/python -m tests.differential.chains_run --count $(N) --seed-start $(S)

## A stream-stream join followed by window aggregations: N seeded join -> agg scenarios through real PySpark.
.PHONY: differential-joinagg
differential-joinagg: $(STAMP) system-deps
	$(BIN)/python -m tests.differential.joinagg --count $(N) --seed-start $(S)

## No-data batches decided by arrival: N seeded scenarios fed in groups, one file per trigger, through real PySpark.
.PHONY: differential-arrival
differential-arrival: $(STAMP) system-deps
	$(BIN)/python -m tests.differential.arrival --count $(N) --seed-start $(S)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

## Restarts of a stream-stream join: N seeded join scenarios split into live/Once/AvailableNow runs, real PySpark vs the engine.
.PHONY: differential-join-restarts
differential-join-restarts: $(STAMP) system-deps
	$(BIN)/python -m tests.differential.join_restarts --count $(N) --seed-start $(S)

## Flink-mode differential tests: N seeded scenarios through real Flink 2.3.0 (one JVM) and the engine.
differential-flink: $(STAMP) system-deps
	$(BIN)/python -m tests.differential.flink.run --count $(N) --seed-start $(S)

## Stream-stream join differential tests: N seeded join scenarios through real PySpark and the engine.
differential-joins: $(STAMP) system-deps
	$(BIN)/python -m tests.differential.joins_run --count $(N) --seed-start $(S)
