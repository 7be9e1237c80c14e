# gatecast: two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-slow test-all lint bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: install          ## the main job: sandbox + SQLite, import, campaign, report
	$(BIN)/gatecast demo

test: install          ## the fast suite: journeys, SQLite and PostgreSQL, sandbox over real HTTP
	$(BIN)/pytest -n 2

test-slow: install     ## kill/soak and browser runs
	$(BIN)/pytest -m slow

test-all: test test-slow

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: install         ## benchmarks at sizes that finish within 10 minutes (add ARGS=--full)
	$(BIN)/python -m bench $(ARGS)

docs: install          ## regenerate docs/cli.md from the CLI itself
	$(BIN)/python -m typer gatecast.cli utils docs --name gatecast \
	  --title "gatecast command-line reference" --output docs/cli.md

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
