"""The fetch callback's ``[value, status]`` protocol, compared value by value
with PCP's binding, live: generated scripts (metric types x return shapes)
run under real dbpmda with ``python3 SCRIPT`` and ``pmda-py compat SCRIPT``."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pmda_py.compat.callbacks import EINVAL, convert
from pmda_py.errors import PmErr
from pmda_py.pmapi import PmType
from tests.compat import callback_gen
from tests.compat.callback_gen import Case
from tests.compat.harness import COMPAT, SYSTEM_PYTHON, bed, both, dbpmda, require_binding


def _run(root: Path, cases: Sequence[Case]) -> tuple[dict[str, str], dict[str, str]]:
    require_binding()
    env = bed(root)
    script, pmns, commands = callback_gen.write(root, cases)
    real = dbpmda([SYSTEM_PYTHON], script, commands, pmns, env, root / "real")
    ours = dbpmda(COMPAT, script, commands, pmns, env, root / "ours")
    return callback_gen.values(real), callback_gen.values(ours)


def _compare(cases: Sequence[Case], real: dict[str, str], ours: dict[str, str]) -> None:
    assert len(real) == len(cases), real  # the binding answered every metric
    diffs = {
        f"{cases[int(k[5:])][0]} {cases[int(k[5:])][1]}": (real[k], ours.get(k)) for k in real if real[k] != ours.get(k)
    }
    assert not diffs, diffs


def test_every_shape_for_every_type(root: Path) -> None:
    """All the shapes for all the types, in one script and one fetch."""
    cases = [
        (t, e)
        for t in callback_gen.TYPES
        for e in callback_gen.SHAPES
        if not callback_gen.undefined(t, e) and (t, e) not in callback_gen.KNOWN_DIFFERENCES
    ]
    real, ours = _run(root, cases)
    _compare(cases, real, ours)


def _binding_python() -> tuple[int, int]:
    out = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, check=True
    )
    major, minor = out.stdout.split()
    return int(major), int(minor)


def test_u64_from_an_index_object(root: Path) -> None:
    """An object with ``__index__`` (not an int) as a U64 value: compat reads
    it, as the binding does on Python 3.14 and later (its ``K`` format takes
    ``__index__`` there); on an older Python the binding refuses it
    (PM_ERR_TYPE), the one difference callback_gen.KNOWN_DIFFERENCES lists."""
    cases: list[Case] = list(callback_gen.KNOWN_DIFFERENCES)
    real, ours = _run(root, cases)
    assert ours["gen.m0"].split()[-2:] == ["value", "7"], ours
    if _binding_python() >= (3, 14):
        _compare(cases, real, ours)
    else:
        assert real["gen.m0"] == "Unknown or illegal metric type", real


#: per-instance returns that leave no exception behind in the binding
_CLEAN = ["None", "[7, 1]", "[0, 0]", "[c_api.PM_ERR_INST, 0]", "[c_api.PM_ERR_AGAIN, 0]", "[-5, 0]", "raise", "(1, 1)"]


def test_instances_values_and_the_last_error(root: Path) -> None:
    """A metric with an indom: the values that succeeded; none succeeded:
    the last instance's status (an error, or no values)."""
    import itertools

    combos = list(itertools.product(_CLEAN, repeat=3))[::7]
    cases: list[Case] = [("U32", list(c)) for c in combos]
    real, ours = _run(root, cases)
    _compare(cases, real, ours)


_ints = st.one_of(
    st.integers(-(2**65), 2**65), st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**32 - 1, 2**63 - 1, -(2**63)])
)
_values = st.one_of(
    _ints.map(repr),
    st.floats(allow_nan=False).map(repr),
    st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=8).map(repr),
    st.sampled_from(["None", "True", "[1]", "c_api.PM_ERR_PMID"]),
)
_status = st.one_of(st.sampled_from(["0", "1", "2", "-1", "True", "1.0", "2**33"]), _ints.map(repr))


@st.composite
def _case(draw: st.DrawFn) -> tuple[str, str]:
    mtype = draw(st.sampled_from(sorted(callback_gen.TYPES)))
    shape = draw(st.sampled_from(["pair", "pair", "pair", "one", "three", "tuple"]))
    v, s = draw(_values), draw(_status)
    expr = {"pair": f"[{v}, {s}]", "one": f"[{v}]", "three": f"[{v}, {s}, 0]", "tuple": f"({v}, {s})"}[shape]
    if callback_gen.undefined(mtype, expr):
        expr = f"[{v}, 1]"  # what the binding cannot answer (it dies), made a wrong-type value
    return mtype, expr


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(st.lists(_case(), min_size=1, max_size=24))
def test_generated_returns(cases: list[tuple[str, str]]) -> None:
    with tempfile.TemporaryDirectory(prefix="pmda_py-compat-") as d:
        root = Path(d)
        root.chmod(0o755)
        real, ours = _run(root, cases)
        _compare(cases, real, ours)


def test_convert_without_pcp() -> None:
    """The edges named in the issue, on the converter alone (runs anywhere)."""
    assert convert(None, PmType.U32) == (0, None)
    assert convert((5, 1), PmType.U32) == (0, None)
    assert convert([2**32 + 7, 1], PmType.U32) == (1, 7)
    assert convert([-1, 1], PmType.U64) == (1, 2**64 - 1)
    assert convert([2**31, 1], PmType.I32) == (EINVAL, None)
    assert convert([1.5, 1], PmType.I32) == (EINVAL, None)
    assert convert([5, 1], PmType.STRING) == (PmErr.TYPE, None)
    assert convert([5, 0], PmType.I64) == (1, 5)
    assert convert([5], PmType.I64) == (EINVAL, None)
    assert convert([PmErr.INST, 0], PmType.DOUBLE) == (PmErr.INST, None)
    assert convert(["x", 1], PmType.STRING) == (1, "x")


MANY = """
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaIndom, pmdaInstid, pmdaMetric
from pcp.pmapi import pmUnits

N = 700


class Many(PMDA):
    def __init__(self):
        PMDA.__init__(self, "many", 403)
        self.connect_pmcd()
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(i * 2, "i%d" % i) for i in range(N)]))
        u = pmUnits(0, 0, 0, 0, 0, 0)
        for item, mtype in enumerate([c_api.PM_TYPE_U64, c_api.PM_TYPE_U32, c_api.PM_TYPE_DOUBLE, c_api.PM_TYPE_64,
                                      c_api.PM_TYPE_32, c_api.PM_TYPE_U64]):
            self.add_metric("many.m%d" % item, pmdaMetric(self.pmid(0, item), mtype, self.indom(0),
                            c_api.PM_SEM_INSTANT, u))
        self.set_fetch_callback(self.cb)

    def cb(self, cluster, item, inst):
        i = inst // 2
        if item == 0:  # every value, 700 of them
            return [i * 3, 1]
        if item == 1:  # an odd one in the first, second and last few hundred
            return {10: [5, True], 300: None, 650: [-1, 1]}.get(i, [i, 1])
        if item == 2:  # a raise, a value with status 0
            if i == 600:
                raise ValueError("a callback that fails")
            return [i, 0] if i == 257 else [i / 2, 1]
        if item == 3:  # no values but in the middle, then an error last
            if i == N - 1:
                return [c_api.PM_ERR_INST, 0]
            return [-i, 1] if 300 <= i < 310 else None
        if item == 4:  # no values at all, the last status an error
            return [c_api.PM_ERR_AGAIN, 0] if i == N - 1 else None
        return [2**64 - 1 - i, 1] if i % 2 else [i, True]
"""


def test_many_instances_as_the_binding(root: Path) -> None:
    """Metrics of 700 instances (callbacks answered in batches): every value,
    and odd returns early, in the middle and late in the indom; the values
    that succeeded, or the last instance's status."""
    require_binding()
    env = bed(root)
    script = root / "pmdamany.python"
    script.write_text(MANY + "\nMany().run()\n")
    pmns = root / "many.pmns"
    pmns.write_text("root {\n\tmany\t403:*:*\n}\n")
    commands = "".join(f"fetch 403.0.{k}\n" for k in range(6)) + "fetch 403.0.0 403.0.1 403.0.2 403.0.5\n"
    real, ours = both(script, commands, pmns, env, root)
    assert real.count("numval: 700") == 4 and real.count("numval: 699") == 4 and "numval: 10 " in real, real
    assert ours == real
