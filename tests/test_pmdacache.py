"""pmda_py.pmdacache against libpcp_pmda's own pmdaCache: the same files
(generated, valid and not) load to the same entries and states, the same
names get the same ids, and a save writes the same file (stamps aside);
then the file handling PCP's code does not have (left in place when
unreadable, never followed through a link, owner and mode kept)."""

from __future__ import annotations

import ctypes.util
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from pmda_py.pmdacache import CacheFull, NameClash, PmdaCache, State, format_cache, parse

DOMAIN = 253

# Runs in a child (libpcp reads PCP_VAR_DIR once): one cache per case, indom
# 253.N, file $PCP_VAR_DIR/config/pmda/253.N.
_LIBPCP = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
out = []
for serial, ops in enumerate(json.load(sys.stdin)):
    indom = (253 << 22) | serial
    res = []
    for op in ops:
        if op[0] == "load":
            res.append(lib.pmdaCacheOp(indom, 1))
        elif op[0] == "add":
            res.append(lib.pmdaCacheStore(indom, 2, op[1].encode("utf-8", "surrogateescape"), None))
        elif op[0] == "inactive":
            res.append(lib.pmdaCacheOp(indom, 9))
        elif op[0] == "save":
            res.append(lib.pmdaCacheOp(indom, 6))
        elif op[0] == "dump":
            name = ctypes.c_char_p()
            ent = []
            for inst in op[1]:
                s = lib.pmdaCacheLookup(indom, inst, ctypes.byref(name), None)
                if s >= 0:
                    ent.append([inst, name.value.decode("utf-8", "surrogateescape"), s])
            res.append(ent)
    out.append(res)
json.dump(out, sys.stdout)
"""


def _libpcp_pmda() -> str:
    lib = ctypes.util.find_library("pcp_pmda")
    if lib is None:
        msg = "REAL PCP NOT AVAILABLE (libpcp_pmda): run scripts/install-pcp"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {msg}")
        pytest.skip(msg)
    return lib


NAMES = ["a", "b", "a b", "a c", "b b", "c d e", "9z", "x\ty", "long " + "n" * 40, "ü", "\udcff"]
INSTS = ["0", "1", "2", "3", "5", "7", "12", "2147483647", "2147483648", "", "007"]


def _line(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.04:
        return rng.choice(["", "   ", "\t", "5", "5 6", "5 6 [6]", "5 6 [612] x", "5 6 [6]y", "5 6 [61", "5 6 [61]"])
    inst = rng.choice(INSTS)
    stamp = rng.choice(["1795502587", "0", "5", ""])
    key = rng.choice(["", "", "", " [6162]", " [00ff]", " []"])
    sep = rng.choice([" ", " ", "  ", "\t"])
    return f"{rng.choice(['', '', ' '])}{inst}{sep}{stamp}{key} {rng.choice(NAMES)}".replace("  ", " ", 0)


def _file(rng: random.Random) -> str:
    odd = ["2 1 2147483647", "2 0 3", "2 1 3", "1 0", "1 1", " 2 0 7 x", "+2 0 9", "3 0 1", "2 2 1", "2 0 -1", "x"]
    header = rng.choice(["2 0 2147483647"] * 6 + [*odd, "2 0"])
    if rng.random() < 0.05:
        return ""
    return "".join(f"{line}\n" for line in [header] + [_line(rng) for _ in range(rng.randrange(0, 8))])


def _ours(text: str, ops: list[list[object]], path: Path) -> tuple[list[object], bytes | None]:
    """Our side of one case: what libpcp's ops return, in our terms."""
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    cache = PmdaCache(str(path))
    res: list[object] = []
    for op in ops:
        if op[0] == "load":
            problem = cache.load()
            res.append("error" if not cache.writable else "ok")
            assert (problem is None) == (cache.writable and not parse(path.read_bytes()).ignored)
        elif op[0] == "add":
            try:
                res.append(cache.lookup(str(op[1])))
            except (NameClash, CacheFull, ValueError):
                res.append("error")
        elif op[0] == "inactive":
            res.append(cache.inactivate_all())
        elif op[0] == "save":
            res.append(cache.save())
        elif op[0] == "dump":
            insts = [i for i in op[1] if isinstance(i, int)] if isinstance(op[1], list) else []
            res.append([[i, cache.name_of(i), int(cache.state_of(i) or 0)] for i in insts if cache.state_of(i)])
    return res, path.read_bytes() if cache.writable else None


def _theirs_terms(res: list[object], ops: list[list[object]]) -> list[object]:
    out: list[object] = []
    for op, r in zip(ops, res):
        if op[0] == "load":
            out.append("error" if isinstance(r, int) and r < 0 else "ok")
        elif op[0] == "add":
            out.append("error" if isinstance(r, int) and r < 0 else r)
        else:
            out.append(r)
    return out


def _mask_stamps(data: bytes, since: int) -> bytes:
    """Stamps of entries saved during the test (now, either side) masked."""

    def fix(m: re.Match[bytes]) -> bytes:
        return m.group(1) + (b"NOW" if int(m.group(2)) >= since else m.group(2))

    return re.sub(rb"(?m)^(\d+ )(\d+)", fix, data)


@pytest.mark.parametrize("seed", range(4))
def test_generated_files_and_adds_agree_with_libpcp(tmp_path: Path, seed: int) -> None:
    lib = _libpcp_pmda()
    rng = random.Random(seed)
    var = tmp_path / "var"
    (var / "config" / "pmda").mkdir(parents=True)
    cases = []
    for _ in range(60):
        text = _file(rng)
        adds: list[list[object]] = [["add", rng.choice(NAMES)] for _ in range(rng.randrange(0, 6))]
        probe = [*range(14), 2147483647]
        ops: list[list[object]] = [["load"], ["dump", probe], ["inactive"], *adds, ["dump", probe], ["save"]]
        cases.append((text, ops))
    for serial, (text, _) in enumerate(cases):
        (var / "config" / "pmda" / f"{DOMAIN}.{serial}").write_bytes(text.encode("utf-8", "surrogateescape"))
    since = int(time.time())
    r = subprocess.run(
        [sys.executable, "-c", _LIBPCP, lib],
        input=json.dumps([ops for _, ops in cases]),
        capture_output=True,
        text=True,
        errors="surrogateescape",
        env={**os.environ, "PCP_VAR_DIR": str(var)},
        timeout=60,
        check=True,
    )
    theirs = json.loads(r.stdout)
    ours_dir = tmp_path / "ours"
    ours_dir.mkdir()
    checked_saves = 0
    for serial, ((text, ops), their) in enumerate(zip(cases, theirs)):
        ours, saved = _ours(text, ops, ours_dir / f"{DOMAIN}.{serial}")
        expect = _theirs_terms(their, ops)
        where = f"case {serial}: file {text!r}, ops {ops}"
        maxinst = parse(text.encode("utf-8", "surrogateescape")).maxinst
        edge = [k for k, (op, r) in enumerate(zip(ops, their)) if op[0] == "add" and not -22 <= r <= maxinst]
        if edge:  # the cache is full
            assert ours[: edge[0]] == expect[: edge[0]], where
            continue
        # libpcp's SAVE returns the entries written (0 when it had nothing to do)
        assert ours[:-1] == expect[:-1], where
        if saved is None:  # unreadable for libpcp too: it would overwrite it, we leave it
            assert expect[0] == "error", where
            assert (ours_dir / f"{DOMAIN}.{serial}").read_text(errors="surrogateescape") == text, where
            continue
        theirs_file = (var / "config" / "pmda" / f"{DOMAIN}.{serial}").read_bytes()
        assert _mask_stamps(saved, since) == _mask_stamps(theirs_file, since), where
        checked_saves += ours[-1] is True
    assert checked_saves > 10  # the comparison of written files was not vacuous


def test_file_libpcp_rejects_is_left_in_place_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / f"{DOMAIN}.1"
    bad = "2 0 2147483647\n0 1795502587 sec\n\x00zz\n"
    path.write_text(bad)
    cache = PmdaCache(str(path))
    problem = cache.load()
    assert problem is not None and "left in place" in problem and "line 3" in problem
    assert cache.lookup("sec") == 0 and cache.lookup("min") == 1  # the ids read before the bad line hold
    assert cache.save() is False and cache.write() is False
    assert path.read_text() == bad
    assert sorted(os.listdir(tmp_path)) == [f"{DOMAIN}.1"]


def test_names_with_spaces_match_up_to_the_first_space(tmp_path: Path) -> None:
    cache = PmdaCache(str(tmp_path / "c"))
    assert cache.lookup("eth0 fast nic") == 0
    assert cache.lookup("eth0") == 0
    with pytest.raises(NameClash):
        cache.lookup("eth0 slow")
    strings = PmdaCache(strings=True)
    assert [strings.lookup(n) for n in ("eth0 fast", "eth0 slow", "eth0")] == [0, 1, 2]


def test_ids_are_not_reused_until_the_maximum(tmp_path: Path) -> None:
    path = tmp_path / "c"
    cache = PmdaCache(str(path))
    for n in "abcd":
        cache.lookup(n)
    cache.cull("d")
    cache.cull("b")
    assert cache.lookup("e") == 4  # not 1 or 3
    cache.resize(5)
    assert cache.lookup("f") == 5
    assert cache.lookup("g") == 1 and cache.mode == 1  # wrapped: the lowest free id from now on
    assert cache.lookup("h") == 3
    with pytest.raises(CacheFull):
        cache.lookup("i")
    cache.save()
    assert path.read_text().splitlines()[0] == "2 1 5"


def test_inactive_entries_are_kept_culled_ones_dropped(tmp_path: Path) -> None:
    path = tmp_path / "c"
    path.write_text("2 0 2147483647\n0 100 a\n1 200 [6162] b\n2 300 c d\n")
    cache = PmdaCache(str(path))
    assert cache.load() is None
    assert [(e.inst, e.name, e.stamp, e.key, e.state) for e in cache.entries()] == [
        (0, "a", 100, None, State.INACTIVE),
        (1, "b", 200, b"ab", State.INACTIVE),
        (2, "c d", 300, None, State.INACTIVE),
    ]
    assert cache.lookup("x") == 3
    cache.cull("a")
    before = int(time.time())
    assert cache.save() is True
    lines = path.read_text().splitlines()
    assert lines[:3] == ["2 0 2147483647", "1 200 [6162] b", "2 300 c d"]
    inst, stamp, name = lines[3].split()
    assert (inst, name) == ("3", "x") and int(stamp) >= before
    assert cache.save() is False  # nothing added or culled since


def test_unwritable_names_get_ids_but_are_not_written_and_logged_once(tmp_path: Path) -> None:
    path = tmp_path / "c"
    cache = PmdaCache(str(path))
    with capture_logs() as logs:
        assert [cache.lookup(n) for n in ("ok", "two\nlines", "n" * 2000)] == [0, 1, 2]
        cache.save()
        cache.lookup("more")
        cache.save()
    assert [e["name"][:5] for e in logs if e["event"] == "instance_name_not_saved"] == ["two\nl", "nnnnn"]
    reread = parse(path.read_bytes())
    assert reread.problem is None and [e.name for e in reread.entries] == ["ok", "more"]


def test_save_replaces_a_link_keeps_mode_and_owner(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    path = tmp_path / f"{DOMAIN}.1"
    path.symlink_to(victim)
    cache = PmdaCache(str(path))
    assert "left in place" in (cache.load() or "")  # a link is not followed: unreadable, left alone
    cache.lookup("a")
    assert cache.save() is False and path.is_symlink()
    cache2 = PmdaCache(str(tmp_path / f"{DOMAIN}.2"))
    cache2.lookup("a")
    cache2.save()
    os.chmod(tmp_path / f"{DOMAIN}.2", 0o640)
    if os.geteuid() == 0:
        os.chown(tmp_path / f"{DOMAIN}.2", 1, 1)
    cache2.lookup("b")
    cache2.save()
    st = os.stat(tmp_path / f"{DOMAIN}.2")
    assert oct(st.st_mode & 0o777) == oct(0o640)
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (1, 1)
    assert victim.read_text() == "keep\n"


def test_format_is_the_inverse_of_parse() -> None:
    text = b"2 1 99\n0 5 a\n3 6 [0aff] b c\n7 8 d\n"
    p = parse(text)
    assert p.problem is None and format_cache(p.mode, p.maxinst, p.entries) == text
