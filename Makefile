# pmda_py developer entry points.  Each target creates its own virtualenv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: all venv test lint format typecheck demo bench clean pcp

all: test

$(BIN)/activate: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(BIN)/activate

venv: $(BIN)/activate

# The tests.  Real-PCP tests skip without PCP, and fail when CI=true.
test: venv
	$(BIN)/python -m pytest $(PYTEST_ARGS)

LINTED := pmda_py tests bench scripts

# Fails on lint findings and on unformatted code (`make format` fixes the latter).
lint: venv
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

format: venv
	$(BIN)/ruff format $(LINTED)

# mypy --strict on the package, the tests and the benchmarks (pyproject.toml).
typecheck: venv
	$(BIN)/mypy

# The main job: run a PMDA and drive it with our dbpmda-compatible harness.
demo: venv
	$(BIN)/python -m pmda_py demo

bench: venv
	$(BIN)/python bench/run.py

# Install real PCP (Debian) for the integration tests; needs root.
pcp:
	bash scripts/install-pcp

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
