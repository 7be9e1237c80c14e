# gatecast: two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOCK   := requirements.lock

.PHONY: install lock demo test test-slow test-all lint bench docs clean

# Installs exactly the versions in requirements.lock (runtime and dev tools), then gatecast
# itself without resolving anything; `pip check` fails when pyproject.toml asks for a package
# the lock lacks (run `make lock`).
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $(STAMP)

install: $(STAMP)

lock: install          ## refresh requirements.lock: the newest versions pyproject.toml allows
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 \
	  --upgrade --custom-compile-command "make lock" --output-file $(LOCK)

demo: install          ## the main job: sandbox + SQLite, import, campaign, report
	$(BIN)/gatecast demo

test: install          ## the fast suite: journeys, SQLite and PostgreSQL, sandbox over real HTTP
	$(BIN)/pytest -n 2 --dist worksteal --durations=30  # an idle worker takes tests waiting on the other

# Two sessions at once: the slow tests on PostgreSQL one after the other (the kill suite's
# restart scenario stops the server, so no other test may use it then; its output comes
# after), the rest on two workers beside them (mostly waiting on paces, kills and events).
test-slow: install     ## kill/soak and browser runs
	mkdir -p test-artifacts
	$(BIN)/pytest -m "slow and postgres" -p no:cacheprovider >test-artifacts/slow-postgres.log 2>&1 & \
	pg=$$!; $(BIN)/pytest -m "slow and not postgres" -n 2 --dist worksteal --durations=20; rest=$$?; \
	wait $$pg; pgrc=$$?; cat test-artifacts/slow-postgres.log; \
	test $$rest -eq 0 -a $$pgrc -eq 0

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
