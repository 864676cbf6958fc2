"""The pcp.pmapi helpers PMDAs call, against the real binding's answers
(python3-pcp of the system python3): pmParseUnitsStr (units, multiplier,
pmUnitsStr of the result), pmParseInterval, pmIDStr."""

from __future__ import annotations

import json
import subprocess

from pmda_py.compat.pmapi import pmContext, pmErr
from tests.compat.harness import SYSTEM_PYTHON, require_binding

UNITS = [
    "count",
    "byte",
    "Kbyte",
    "Kbyte / sec",
    "count / sec",
    "millisec",
    "nanosec / count",
    "byte^2",
    "count x 10^3",
    "Mbyte/hour",
    "5 Kbyte",
    "1/sec",
    "microsec",
    "hour",
    "min",
    "",
    "kilobytes",
    "Gbyte / min",
]
INTERVALS = ["5", "1.5 sec", "2min 30s", "10msec", "1 hour", "0.25"]

_REAL = """
import json, sys
from pcp.pmapi import pmContext as C
out = {"units": {}, "intervals": {}}
for s in json.loads(sys.argv[1]):
    try:
        u, m = C.pmParseUnitsStr(s)
    except Exception as err:
        out["units"][s] = "refused: %s" % err
        continue
    out["units"][s] = [[u.dimSpace, u.dimTime, u.dimCount, u.scaleSpace, u.scaleTime, u.scaleCount], m, str(u)]
for s in json.loads(sys.argv[2]):
    t, _ = C.pmParseInterval(s)
    usec = t.tv_usec if hasattr(t, "tv_usec") else t.tv_nsec // 1000  # PCP 7: a timespec
    out["intervals"][s] = [t.tv_sec, usec]
out["pmid"] = C.pmIDStr(C.pmID_build(253, 1, 2))
print(json.dumps(out))
"""


def test_helpers_answer_as_the_binding() -> None:
    require_binding()
    r = subprocess.run(
        [SYSTEM_PYTHON, "-c", _REAL, json.dumps(UNITS), json.dumps(INTERVALS)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    real = json.loads(r.stdout)
    for s in UNITS:
        if isinstance(real["units"][s], str):  # this PCP's libpcp refuses it: so must we
            try:
                pmContext.pmParseUnitsStr(s)
            except pmErr:
                continue
            raise AssertionError(f"{s!r}: {real['units'][s]}, but accepted here")
        u, m = pmContext.pmParseUnitsStr(s)
        ours = [[u.dimSpace, u.dimTime, u.dimCount, u.scaleSpace, u.scaleTime, u.scaleCount], m, str(u)]
        assert ours == real["units"][s], s
    for s in INTERVALS:
        t, _ = pmContext.pmParseInterval(s)
        assert [t.tv_sec, t.tv_usec] == real["intervals"][s], s
    assert pmContext.pmIDStr(pmContext.pmID_build(253, 1, 2)) == real["pmid"]


def test_bad_input_is_pm_err_conv() -> None:
    for bad in ("bytes per second", "furlongs"):
        try:
            pmContext.pmParseUnitsStr(bad)
        except pmErr as err:
            assert err.code == -12362  # PM_ERR_CONV
        else:
            raise AssertionError(bad)
