# Hearth — `make run` and `make test` work on a fresh clone (they install first).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run setup test lint bench bench-gate bundled-grants clean

install: $(STAMP)

# the optional groups (pyproject.toml) come too: semantic memory, Telegram and Slack are the default
# experience (docs/adr/0077-optional-dependency-groups.md). The stamp follows this file too, so
# a change to the groups listed here installs them on the next `make`.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,memory,telegram,discord,slack,matrix,email]'
	touch $(STAMP)

run: install
	$(BIN)/python main.py

# the setup wizard: model, Telegram, timezone (re-runnable; `main.py setup --help` for scripts)
setup: install
	$(BIN)/python main.py setup

# the suite in parallel (pytest-xdist), one worker per core and one more: most of a test's
# time is CPU (kernel processes importing the agents SDK), the extra worker fills the waits
# on subprocesses (on 2 loaded cores 2-3 workers beat 4 and 6); `worksteal` moves queued tests
# off a worker stuck on slow ones. TEST_WORKERS=0 runs in one process. Exit 5 (no tests) passes.
# The project's modules are compiled first: the suite starts hundreds of Python processes, and
# where PYTHONDONTWRITEBYTECODE is set none of them would keep its bytecode (~1 s each).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: install
	$(BIN)/python -m compileall -q -j0 core tests sandbox/extensions bench main.py >/dev/null
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal $(TEST_ARGS) || [ $$? -eq 5 ]

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: install
	@for b in bench/*.py; do echo "== $$b" >&2; $(BIN)/python $$b || exit 1; done

# CI: the benchmarks with budgets (bench/budgets.json, only ever tightened)
bench-gate: install
	$(BIN)/python bench/hooks.py --fast --check bench/budgets.json
	$(BIN)/python bench/memory.py --check bench/budgets.json
	$(BIN)/python bench/floor.py --fast --check bench/budgets.json
	$(BIN)/python bench/bus.py --check bench/budgets.json
	$(BIN)/python bench/path.py --both --check bench/budgets.json
	$(BIN)/python bench/long_conversation.py --check bench/budgets.json
	$(BIN)/python bench/declared_once.py --check

# after changing a bundled extension: the project's grant binds its code (ADR 0044)
bundled-grants: install
	$(BIN)/python -c "from core.extensions.access.grant_store import write_bundled_grants as w; w()"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
