# The two commands of the README's quick start:
#   make demo   set everything up, then run the main job on the embedded defaults
#   make test   set everything up, lint and type-check, then run the whole test suite
.PHONY: setup demo lint test test-fast bench bench-cluster fuzz clean

setup: .venv/.installed

.venv/.installed: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

demo: setup
	.venv/bin/oncelog verify --semantics all

# Three pytest-xdist workers, tests handed out as each worker frees up (worksteal): much of
# the suite's time is brokers, ZooKeeper and Spark processes waiting (fault windows,
# sessions, JVM start-up) - a clean-clone run on two workers used 55 CPU-minutes of the 101
# its two cores offered in 51 minutes (2026-11-29) - so a third worker on two cores fills
# the waits. `.venv/bin/pytest` alone runs it serially; every test keeps to its own ports,
# folders, network namespaces and processes.
PYTEST_WORKERS ?= 3
test: lint
	.venv/bin/pytest -n $(PYTEST_WORKERS) --dist worksteal

test-fast: lint
	.venv/bin/pytest -n $(PYTEST_WORKERS) --dist worksteal -m "not slow"

# The linter and the type checker, both pinned in pyproject.toml (which configures them):
# any finding fails make test, and so CI, before a test runs. mypy keeps its cache in
# .mypy_cache: a second run takes about a second.
lint: setup
	.venv/bin/ruff check
	.venv/bin/mypy

bench: setup
	.venv/bin/python benchmarks/throughput.py

bench-cluster: setup
	.venv/bin/python benchmarks/cluster.py

# Long fuzzing, not part of `make test`: the decoders for FUZZ_SECONDS under coverage
# guidance (new findings merged into fuzz/corpus/), then FUZZ_FRAMES mutated frames thrown
# at a live broker process, which must end serving with every acknowledged record intact.
FUZZ_SECONDS ?= 600
FUZZ_FRAMES ?= 1000000
fuzz: setup
	mkdir -p .fuzz/new
	.venv/bin/python fuzz/fuzz_decoders.py .fuzz/new fuzz/corpus/requests fuzz/corpus/batches \
		-max_total_time=$(FUZZ_SECONDS) -timeout=5 -rss_limit_mb=2048 -artifact_prefix=.fuzz/
	.venv/bin/python fuzz/fuzz_decoders.py -merge=1 fuzz/corpus/requests .fuzz/new
	.venv/bin/python fuzz/fuzz_broker.py --frames $(FUZZ_FRAMES)

clean:
	rm -rf .venv .pytest_cache .hypothesis .fuzz .mypy_cache .ruff_cache build src/*.egg-info
