# Two entry points: `make demo` (the main job on the embedded cluster) and `make test`.
# Both set everything up on a fresh machine: Java check, apt packages, venv, Python packages.

# Python 3.11, 3.12 or 3.13: `make test PYTHON=python3.13`. Each Python has its own venv (.venv for the default).
PYTHON ?= python3.11
VENV ?= $(if $(filter python3.11,$(PYTHON)),.venv,.venv-$(notdir $(PYTHON)))
PY := $(VENV)/bin/python
# Two stamps: the runtime dependencies (all `make demo` needs), then the development tools on top (`make test`).
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed-dev
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: demo test test-fast lint bench setup java system-packages clean lock

demo: java $(RUNTIME_STAMP)
	$(VENV)/bin/opsd demo $(DEMO_ARGS)

# The whole suite: the quick lane on every core, then the tests that start Spark or an external program, one at a time
# (they share the machine's cores among their own processes).
test: setup system-packages
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -n $(FAST_WORKERS) -m "$(FAST_MARKERS)" $(PYTEST_ARGS)
	$(PY) -m pytest -m "not ($(FAST_MARKERS))" $(PYTEST_ARGS)

# The quick lane while developing: every test that starts neither Spark nor an external program (markers in
# pyproject.toml; tests/support/programs.py fails a test that starts one unmarked), two pytest-xdist workers a core:
# many of these tests wait on a stand-in's HTTP or a CLI's process (on 2 cores: 83 s with 2 workers, 72 s with 4,
# 82 s with 6). No Java or Debian packages needed.
FAST_MARKERS := not spark and not prometheus and not tmux and not checkov
FAST_WORKERS ?= $(shell echo $$(( 2 * $$(nproc) )))
test-fast: $(STAMP)
	$(PY) -m pytest -n $(FAST_WORKERS) -m "$(FAST_MARKERS)" $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

bench: setup
	for b in cluster wire source sink batch_phases latency opsd_overhead insight oom_risk autotune; do \
	  if [ -f bench/$$b.py ]; then $(PY) -m bench.$$b || exit 1; fi; \
	done

setup: java $(STAMP)

java:
	@command -v java >/dev/null 2>&1 || { \
	  echo "ERROR: Java 17 is required by Spark and 'java' is not on PATH."; \
	  echo "       Install it with: sudo apt-get install -y openjdk-17-jre-headless"; \
	  echo "       (or set JAVA_HOME and put \$$JAVA_HOME/bin on PATH)"; exit 1; }

$(RUNTIME_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e .
	touch $@

$(STAMP): $(RUNTIME_STAMP)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# promtool and the Prometheus server are used by the tests (Debian package `prometheus`), and Alertmanager by the
# alert fidelity matrix (Debian package `prometheus-alertmanager`, binary `prometheus-alertmanager`); tmux is the
# terminal the demo's test watches the live view in. Each entry is package:command; missing ones are installed at once.
DEBIAN_PACKAGES := prometheus:promtool prometheus-alertmanager:prometheus-alertmanager tmux:tmux
system-packages:
	@missing=""; for pair in $(DEBIAN_PACKAGES); do \
	  command -v $${pair##*:} >/dev/null 2>&1 || missing="$$missing $${pair%%:*}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$(command -v sudo >/dev/null 2>&1 && [ $$(id -u) -ne 0 ] && echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

clean:
	rm -rf .opsd spark-warehouse

# The image's lock files (Dockerfile): every runtime dependency with the `spyt` extra, and the build tools, pinned with
# their hashes by pip-compile. pip-tools runs in a venv of its own (its `build` dependency conflicts with checkov's).
LOCK_VENV := .lock-venv
# The image's Python (the Dockerfile's FROM), whatever PYTHON is: the locks are resolved for the interpreter they install
# into (tests/test_dockerfile.py checks the two agree).
LOCK_PYTHON := python3.11
PIP_COMPILE := $(LOCK_VENV)/bin/pip-compile --quiet --generate-hashes --allow-unsafe --no-emit-index-url \
	--no-emit-find-links --strip-extras
lock:
	test -x $(LOCK_VENV)/bin/pip-compile || { $(LOCK_PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install -q pip-tools; }
	$(PIP_COMPILE) --extra spyt --output-file requirements.lock pyproject.toml
	$(PIP_COMPILE) --only-build-deps --all-build-deps --output-file requirements-build.lock pyproject.toml
