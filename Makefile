# Two commands on a fresh machine (Python >= 3.11, no GPU needed):
#   make run     set up .venv when missing, then run a scenario (default: quickstart)
#                make run SCENARIO=membership-signal ARGS="--set federation.rounds=3"
#   make test    set up .venv when missing, then the test suite
# The set-up pins torch to the wheels this machine has on disk; `make -n run` shows it.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SCENARIO ?= quickstart
ARGS ?=
TORCH := torch==2.14.1 torchvision==0.29.1
STAMP := $(VENV)/.fedaudit-installed

export FLWR_TELEMETRY_ENABLED = 0
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: run test setup clean-venv

run: $(STAMP)
	$(VENV)/bin/fedaudit run $(SCENARIO) $(ARGS)

# The import layering (.importlinter: Flower only in fedaudit.simulation and strategies, no
# cycles), then the unit tests (tests/<area>/) with one torch thread (tolerances must not
# depend on the kernels' blocking; a plain `pytest` runs them with the machine's cores, so a
# developer's run checks another thread count), then the end-to-end tests (tests/e2e/:
# Flower + Ray, Flower's deployment, the lab notebooks) with two.  Together: the default
# suite (`pytest`, everything not marked slow), each test once.
#
# The unit tests run as two pytest processes at once, one thread each: one process would
# leave the second core idle (CI has two).  UNIT_A holds the folders whose tests start the
# command line in subprocesses or validate scenarios with their data (tests/docs and the
# scenario headers' test check every documented command): about half of the unit tests'
# time; the other process every other folder, so a new folder lands there without an edit.
# The second process's report is printed after the first's; the recipe fails if either
# fails.  The end-to-end tests run alone: two Ray runs at once would compete for the cores
# and the Ctrl-C test times its exit.
UNIT := FEDAUDIT_TEST_THREADS=1 $(PY) -m pytest -q -m "not slow and not e2e" -p no:cacheprovider
UNIT_A := tests/simulation tests/config tests/project tests/data tests/secrets tests/audit \
	tests/docs

test: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache
	@log=$$(mktemp); echo '$(UNIT) $(UNIT_A) &'; \
	$(UNIT) $(UNIT_A) > $$log 2>&1 & a=$$!; \
	echo '$(UNIT) $(UNIT_A:%=--ignore=%)'; \
	$(UNIT) $(UNIT_A:%=--ignore=%); b=$$?; \
	wait $$a; a=$$?; cat $$log; rm -f $$log; test $$a = 0 && test $$b = 0
	FEDAUDIT_TEST_THREADS=2 $(PY) -m pytest -m "e2e and not slow" --durations=25

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "fedaudit needs Python >= 3.11, found " + sys.version.split()[0])'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

clean-venv:
	rm -rf $(VENV)
