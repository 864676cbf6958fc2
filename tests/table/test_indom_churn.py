"""An indom whose names keep changing (processes, containers, label churn)
holds a bounded number of names: InDom.set_names remembers the ids of at
most INACTIVE_KEPT names that went away, forgetting those gone longest
first, in memory and in its persistent file; and logs at most REFUSED_KEPT
refused names, then one line."""

from __future__ import annotations

from pathlib import Path

import structlog

from pmda_py.pmdacache import PmdaCache, parse
from pmda_py.table import InDom
from pmda_py.table.indom import INACTIVE_KEPT, REFUSED_KEPT

ROUND = 1000


def _churn(ind: InDom, rounds: int) -> None:
    for r in range(rounds):
        ind.set_names([f"r{r}-{k}" for k in range(ROUND)])


def test_names_that_went_away_are_kept_up_to_the_bound() -> None:
    ind = InDom(0)
    first = ind.set_names([f"r0-{k}" for k in range(ROUND)])
    rounds = INACTIVE_KEPT // ROUND + 5
    _churn(ind, rounds)
    entries = ind.cache.entries()
    assert len(entries) == INACTIVE_KEPT + ROUND  # before: every name ever seen (16 000 here, growing)
    assert sorted(ind.instances.values()) == sorted(f"r{rounds - 1}-{k}" for k in range(ROUND))
    # the names gone longest were forgotten: back, they get new ids
    again = ind.set_names([f"r0-{k}" for k in range(ROUND)])
    assert set(again).isdisjoint(first)
    # a name gone recently is still known: back, it has its id
    recent = f"r{rounds - 2}-7"
    known = ind.cache.inst_of(recent)
    assert known is not None and ind.set_names([recent]) == {known: recent}


def test_names_that_come_back_keep_their_ids_however_often() -> None:
    ind = InDom(0)
    ids = ind.set_names(["a", "b", "c"])
    for r in range(3 * INACTIVE_KEPT // ROUND):
        ind.set_names([f"other{r}"])  # a few names come and go meanwhile: far under the bound
        assert ind.set_names(["a", "b", "c"]) == ids


def test_a_persistent_file_keeps_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "253.0"
    ind = InDom(0, persistent=True, cache=PmdaCache(str(path)))
    _churn(ind, INACTIVE_KEPT // ROUND + 3)
    saved = parse(path.read_bytes())
    assert len(saved.entries) == INACTIVE_KEPT + ROUND


def test_refused_names_are_logged_up_to_a_bound() -> None:
    ind = InDom(0)
    ind.set_names([f"k{i} x" for i in range(2 * REFUSED_KEPT)])
    with structlog.testing.capture_logs() as logs:
        ind.set_names([f"k{i} y" for i in range(2 * REFUSED_KEPT)])  # each clashes with "kN x"
        ind.set_names([f"k{i} y" for i in range(2 * REFUSED_KEPT)])
    events = [str(line["event"]) for line in logs]
    assert events.count("instance_refused") == REFUSED_KEPT
    assert events.count("instance_refusals_not_logged") == 1
