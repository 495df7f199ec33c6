# The two commands of the README:  `make run`  and  `make test`.
# Both build .venv from this checkout when it is missing or pyproject.toml changed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
REPO   ?= .

.PHONY: run test check venv docs clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	rm -f $(VENV)/.installed-*
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first and pinned: an unpinned torch resolves a multi-GB CUDA build
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

## The main job: the daemon keeping REPO (default: this checkout) indexed, on the embedded
## defaults, in the foreground (Ctrl-C stops it; `codechunkd status` in another terminal).
run: $(STAMP)
	$(BIN)/codechunkd run $(REPO)

## The whole test suite: formatting, lint, types, then pytest (slow tests included).
test: $(STAMP) check
	$(BIN)/python -m pytest

check: $(STAMP)
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy

## Regenerate the settings tables of docs/settings.md from the settings' docstrings.
docs: $(STAMP)
	$(BIN)/python scripts/settings_doc.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
