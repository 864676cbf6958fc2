# pmda_py developer entry points.  Each target creates its own virtualenv.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: all venv test test-fast test-pcp7 test-pcp63 lint format typecheck demo bench clean pcp

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

# The fast tiers, for the edit-test loop: the sans-IO core (wire, session, the
# type model, PMNS and config files) and the tests that drive the dispatcher and
# the tables in-process; no PCP, no daemon process, no test marked slow.
# `make test` (what CI runs) runs everything.
FAST_TESTS := tests/wire tests/dispatch tests/table tests/test_session.py tests/test_types.py \
	tests/test_config.py tests/test_layers.py tests/test_docs.py tests/test_safefile.py tests/test_pmns.py \
	tests/test_pmdacache.py tests/test_support.py tests/test_state_files.py tests/test_pcpversion.py \
	tests/dbpmda/test_grammar.py tests/runtime/test_pump.py

test-fast: venv
	$(BIN)/python -m pytest -m "not slow and not pcp" $(FAST_TESTS) $(PYTEST_ARGS)

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

# The real-PCP tests again in a Debian unstable chroot (PCP 7.x, its Python),
# built once and cached under /var/cache/pmda_py; needs root.
test-pcp7:
	bash scripts/pcp-chroot test $(PYTEST_ARGS)

# The same in a Debian 13 (trixie) chroot: PCP 6.3.x, the first strict decoders.
test-pcp63:
	PMDA_PY_CHROOT_SUITE=trixie bash scripts/pcp-chroot test $(PYTEST_ARGS)

# Install real PCP (Debian) for the integration tests; needs root.
pcp:
	bash scripts/install-pcp

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
