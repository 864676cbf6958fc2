"""Live: generated scripts (valid commands with random arguments, wrong
argument kinds, missing and extra tokens, odd spacing, comments, quotes) give
the same transcript in real dbpmda 6.0.3 and ``pmda-py dbpmda``, driving
PCP's pmdasample or our daemon (tests/dbpmda/differential.py).  A fixed
corpus of seeds; scripts/dbpmda_diff.py runs random ones."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

import pytest

from tests.dbpmda.differential import Bed, generate, without_libpcp_debug
from tests.integration.pcpbed import require_pcp

pytestmark = pytest.mark.pcp

#: a fixed slice, plus seeds that once differed (kept as regressions):
#: 700375 -- getiname's failed instance lookup prints inside the "inst [" line
SEEDS = [*range(7000, 7030), 700375]


@pytest.fixture(scope="module")
def bed() -> Iterator[Bed]:
    require_pcp()
    b = Bed()
    try:
        yield b
    finally:
        b.close()


def test_generator_covers_the_kinds_of_line() -> None:
    text = "".join(generate(seed)[0] for seed in SEEDS)
    for needle in ("\t", "#", '"', "'", ",", "store ", "fetch ", "label ", "instance ", "profile "):
        assert needle in text, needle
    scripts = [generate(seed) for seed in SEEDS]
    assert all(s.count("\n") == 12 for s, _ in scripts)
    assert any(simple for _, simple in scripts) and not all(simple for _, simple in scripts)


@pytest.mark.slow
def test_fixed_seeds_same_transcript_as_dbpmda(bed: Bed) -> None:
    failures = []
    for seed in SEEDS:
        o = bed.compare(seed)
        assert not o.traceback, f"seed {seed}: traceback\n{o.ours[1]}"
        real = (o.real[0], without_libpcp_debug(o.real[1]))
        if real != o.ours:
            diff: list[str] = []
            for a, b in zip(real, o.ours):
                diff += difflib.unified_diff(a.splitlines(), b.splitlines(), "dbpmda", "pmda-py", lineterm="")
            failures.append(f"seed {seed}:\n{o.script}\n" + "\n".join(diff[:30]))
    assert not failures, "\n\n".join(failures[:3])
