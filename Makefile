# Two commands do all the set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_BASE := $(VENV)/.installed-base
STAMP_ALL := $(VENV)/.installed-all

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP_BASE): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[ros]"
	touch $@

$(STAMP_ALL): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[ros,dev,ray]"
	# openpi's client, only to prove our policy server speaks its protocol. It pins numpy<2,
	# which its code does not need (and pyarrow needs numpy 2): install it without its pins.
	$(BIN)/python -m pip install -q --no-deps "openpi-client==0.1.2"
	touch $@ $(STAMP_BASE)

demo: $(STAMP_BASE)
	$(BIN)/python -m embodied_eval.demo

test: $(STAMP_ALL)
	$(BIN)/ruff check .
	$(BIN)/mypy embodied_eval sim_suites real_bridge incident_logging
	$(BIN)/python -m pytest -q -p no:cacheprovider --timeout=600

lint: $(STAMP_ALL)
	$(BIN)/ruff check .
	$(BIN)/mypy embodied_eval sim_suites real_bridge incident_logging

bench: $(STAMP_ALL)
	for b in benchmarks/*_bench.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
