"""A rescan that finds one file changed among many costs the event loop
that file's names, not every file's: the table hands the dispatcher the
same Metric and InDom objects for what did not change, so the index
update (which diffs the table's metrics by object) touches only the
changed file's names (issue 19 case 9: the swap of a rescan at 4 000 files
stopped the loop 300 ms; bench/mmv_scale.py has the figures)."""

from __future__ import annotations

import struct
from pathlib import Path

from pmda_py.dispatch import Dispatcher, Mount, MountIndex
from pmda_py.mmv.table import MmvTable
from pmda_py.testing.support import InlineRunner as _Runner
from tests.mmv.corpus import MMV

GENSTATS = (MMV / "qa_v1_genstats.mmv").read_bytes()  # metrics on two indoms
HELP = (MMV / "qa_v1_help.mmv").read_bytes()
N = 40


def _with_cluster(data: bytes, cluster: int) -> bytes:
    out = bytearray(data)
    struct.pack_into("=i", out, 36, cluster)  # a v1 header's cluster
    return bytes(out)


def _rescan(table: MmvTable, disp: Dispatcher) -> tuple[set[str], set[str]]:
    """One scan swapped in and the index brought up to it: the names the
    update removed and added."""
    rebuilds = disp.index_rebuilds
    table._apply(table._scan_state())
    disp._refresh_index()
    assert disp.index_rebuilds == rebuilds, "an in-place update was expected"
    fresh = MountIndex.build(disp.mounts, disp.domain, strict=False, prepare=lambda ind: None)
    assert disp.all_names == fresh.by_name  # what a build from scratch gives
    gone, came = disp.index.partial
    return set(gone), set(came)


def test_a_one_file_change_reindexes_only_that_file(tmp_path: Path) -> None:
    d = tmp_path / "mmv"
    d.mkdir()
    for k in range(N):
        (d / f"f{k:02d}").write_bytes(_with_cluster(GENSTATS, 100 + k))
    table = MmvTable(dir=str(d), compat="1", pcp_version="6.0.3")
    table._apply(table._scan_state())  # as startup() does before the first index
    disp = Dispatcher(70, [Mount(table, "mmv")], _Runner())
    names = set(disp.all_names)
    per_file = {n for n in names if n.startswith("mmv.f07.")}
    assert per_file and len(names) > N * len(per_file) // 2
    before = {p: m for p, (_mount, m) in disp.index.by_pmid.items()}

    # nothing changed (a reload): nothing touched
    assert _rescan(table, disp) == (set(), set())

    # one file rewritten with other metrics (same cluster): only its names come and go
    (d / "f07").write_bytes(_with_cluster(HELP, 107))
    gone, came = _rescan(table, disp)
    assert gone and came
    assert all(n.startswith("mmv.f07.") for n in gone | came), sorted(gone | came)
    # (the metrics of every other file are the very objects indexed before)
    for p, (_mount, m) in disp.index.by_pmid.items():
        if not disp.index.by_name.get(f"mmv.{m.name}") or m.name.startswith("f07."):
            continue
        if p in before:
            assert before[p] is m, m.name

    # one file added, then one removed: only theirs
    (d / "g00").write_bytes(_with_cluster(GENSTATS, 300))
    gone, came = _rescan(table, disp)
    assert not gone and came and all(n.startswith("mmv.g00.") for n in came)
    (d / "f13").unlink()
    gone, came = _rescan(table, disp)
    assert not came and gone == {n.replace("f07", "f13", 1) for n in per_file}


def test_a_changed_indom_is_a_new_object_and_its_metrics_new_names(tmp_path: Path) -> None:
    """Reuse never hides a change: an instance renamed gives a new InDom
    (the dispatcher forgets the old one's replies) and new Metric objects
    for the metrics that name it."""
    d = tmp_path / "mmv"
    d.mkdir()
    for k in range(3):
        (d / f"f{k}").write_bytes(_with_cluster(GENSTATS, 100 + k))
    table = MmvTable(dir=str(d), compat="1", pcp_version="6.0.3")
    table._apply(table._scan_state())
    disp = Dispatcher(70, [Mount(table, "mmv")], _Runner())
    old = {m.name: m for m in table.metrics()}
    old_indoms = {i.serial: i for i in table.indoms()}
    assert sum(m.indom is not None for m in old.values()) >= 3
    data = bytearray(_with_cluster(GENSTATS, 101))
    names = [ind.instances for ind in old_indoms.values() if ind.instances]
    first = next(iter(names[0].values())).encode()
    at = bytes(data).index(first + b"\0")
    data[at] = ord("Z") if data[at] != ord("Z") else ord("Y")
    (d / "f1").write_bytes(bytes(data))
    gone, came = _rescan(table, disp)
    new = {m.name: m for m in table.metrics()}
    renamed = {
        i.serial for i in table.indoms() if i.serial in old_indoms and i.instances != old_indoms[i.serial].instances
    }
    assert len(renamed) == 1
    hit = 0
    for name, m in new.items():
        if m.indom is not None and m.indom.serial in renamed:
            hit += 1
            assert name.startswith("f1.")
            assert old[name] is not m and old[name].indom is not m.indom, name
            assert f"mmv.{name}" in gone and f"mmv.{name}" in came
        else:
            assert old[name] is m, name  # (the other indom's, the singular ones, the other files')
            assert f"mmv.{name}" not in gone | came
    assert hit >= 2


def _clusters(disp: Dispatcher) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for name, pmid in disp.all_names.items():
        out.setdefault(name.split(".")[1], set()).add((pmid >> 10) & 0xFFF)
    return out


def test_two_files_asking_for_one_cluster_never_share_it(tmp_path: Path) -> None:
    """docs/mmv.md: the later file is refused with a log line; the first
    one is served as it is."""
    import structlog.testing

    d = tmp_path / "mmv"
    d.mkdir()
    (d / "a").write_bytes(_with_cluster(GENSTATS, 100))
    (d / "b").write_bytes(_with_cluster(HELP, 100))
    table = MmvTable(dir=str(d), compat="1", pcp_version="6.0.3")
    with structlog.testing.capture_logs() as logs:
        table._apply(table._scan_state())
    disp = Dispatcher(70, [Mount(table, "mmv")], _Runner())
    clusters = _clusters(disp)
    assert clusters["a"] == {100} and "b" not in clusters, clusters
    said = [e for e in logs if e["event"] == "mmv_problem" and e.get("file") == "b"]
    assert len(said) == 1 and "cluster 100 already taken by a" in said[0]["problem"], logs


def test_automatic_clusters_survive_rescans(tmp_path: Path) -> None:
    """docs/mmv.md: a file asking for no cluster keeps the one it was given
    when files come and go around it."""
    d = tmp_path / "mmv"
    d.mkdir()
    (d / "m").write_bytes(_with_cluster(GENSTATS, 0))
    (d / "z").write_bytes(_with_cluster(HELP, 0))
    table = MmvTable(dir=str(d), compat="1", pcp_version="6.0.3")
    table._apply(table._scan_state())
    disp = Dispatcher(70, [Mount(table, "mmv")], _Runner())
    first = _clusters(disp)
    (d / "a").write_bytes(_with_cluster(HELP, 0))  # sorts before them, asks for no cluster either
    _rescan(table, disp)
    then = _clusters(disp)
    assert then["z"] == first["z"] and then["m"] == first["m"], (first, then)
    (d / "m").unlink()
    (d / "b").write_bytes(_with_cluster(HELP, 0))  # comes as m goes
    _rescan(table, disp)
    (d / "m").write_bytes(_with_cluster(GENSTATS, 0))  # m back again
    _rescan(table, disp)
    last = _clusters(disp)
    assert {k: last[k] for k in ("a", "m", "z")} == {k: then[k] for k in ("a", "m", "z")}, (then, last)
    assert len({c for cs in last.values() for c in cs}) == len(last)  # no two share one


def test_clusters_of_gone_files_are_remembered_within_a_bound(tmp_path: Path) -> None:
    """A writer making file after file of new names: the table remembers
    the clusters of at most REMEMBERED files gone (those seen last), so
    the map does not grow with every name ever seen (it did), and a file
    gone lately still gets its cluster back."""
    d = tmp_path / "mmv"
    d.mkdir()
    table = MmvTable(dir=str(d), compat="1", pcp_version="6.0.3")
    table.REMEMBERED = 3
    (d / "keep").write_bytes(_with_cluster(HELP, 0))
    given: dict[str, int] = {}
    for k in range(12):
        name = f"f{k:02d}"
        (d / name).write_bytes(_with_cluster(HELP, 0))
        table._apply(table._scan_state())
        given[name] = table.export.clusters[name]
        (d / name).unlink()
        assert len(table._sticky) <= 2 + 3, table._sticky
    assert set(table._sticky) == {"keep", "f11", "f10", "f09", "f08"}, table._sticky  # f11: at the last scan
    (d / "f10").write_bytes(_with_cluster(HELP, 0))
    table._apply(table._scan_state())
    assert table.export.clusters["f10"] == given["f10"], (table.export.clusters, given)
    assert table.export.clusters["keep"] == table._sticky["keep"]
