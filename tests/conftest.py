"""Shared test configuration: the test data folder, hypothesis profiles."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[1]
#: golden data recorded from real PCP (tests/data/README.md says how)
DATA = REPO / "tests" / "data"
PDUS = DATA / "pdus"
MMV_DATA = DATA / "mmv"

# Hypothesis: random every run, in CI too (a fixed seed hides bugs: see
# tests/test_pmns.py's regression example).  The seed is chosen here, printed
# in the report header and reusable with --hypothesis-seed=N.  The "fixed"
# profile (--hypothesis-profile=fixed) is the derandomised, small one.
settings.register_profile(
    "default", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fixed", derandomize=True, max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("PMDA_PY_HYPOTHESIS_PROFILE", "default"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    fixed = "fixed" in (config.getoption("hypothesis_profile", None), settings.get_current_profile_name())
    if config.getoption("hypothesis_seed", None) is None and not fixed:
        config.option.hypothesis_seed = str(random.SystemRandom().randrange(2**32))


def pytest_report_header(config: pytest.Config) -> str:
    seed = config.getoption("hypothesis_seed", None)
    return f"hypothesis seed: {seed} (re-run with --hypothesis-seed={seed})"
