# The two commands of the README's quick start:
#   make demo   set everything up, then run the main job on the embedded defaults
#   make test   set everything up, then run the whole test suite
.PHONY: setup demo test test-fast bench clean

setup: .venv/.installed

.venv/.installed: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

demo: setup
	.venv/bin/oncelog verify --semantics all

test: setup
	.venv/bin/pytest

test-fast: setup
	.venv/bin/pytest -m "not slow"

bench: setup
	.venv/bin/python benchmarks/throughput.py

clean:
	rm -rf .venv .pytest_cache .hypothesis build src/*.egg-info
