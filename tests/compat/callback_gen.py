"""Generated pcp.pmda scripts for the fetch callback protocol: one
singular metric per (type, return expression), each followed by a "pad"
metric, so the binding's sticky exception (a bad return leaves a Python
exception set that fails the next callback, see docs/compat.md) lands on a pad
and never on a compared metric."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Union

#: a metric's type name and its callback's return: one expression, or one
#: per instance of a three-instance indom
Case = tuple[str, Union[str, list[str]]]

TYPES = {"32": 0, "U32": 1, "64": 2, "U64": 3, "FLOAT": 4, "DOUBLE": 5, "STRING": 6}

#: return expressions worth trying for any type (the callback evals them)
SHAPES = [
    "None",
    "()",
    "(5, 1)",
    "[5, 1]",
    "[5, 0]",
    "[0, 0]",
    "[-3, 0]",
    "[c_api.PM_ERR_INST, 0]",
    "[c_api.PM_ERR_AGAIN, 0]",
    "[5, 2]",
    "[5, True]",
    "[5, 1.0]",
    "[5]",
    "[5, 1, 2]",
    "{}",
    "'ab'",
    "b'ab'",
    "[True, 1]",
    "[-1, 1]",
    "[2**31, 1]",
    "[2**32 + 7, 1]",
    "[-(2**31) - 1, 1]",
    "[2**63, 1]",
    "[2**64 + 9, 1]",
    "[-(2**63), 1]",
    "[1.5, 1]",
    "[-0.25, 0]",
    "[1e40, 1]",
    "[float('inf'), 1]",
    "['abc', 1]",
    "['', 1]",
    "['x y', 0]",
    "['a\\\\0b', 1]",
    "[None, 1]",
    "[5, 2**40]",
    # values that are not plain ints, floats, strs or lists: what the
    # converters read through ``__index__``/``__float__``/``len``+``[i]``
    "[__import__('fractions').Fraction(3, 2), 1]",
    "[__import__('decimal').Decimal('2.5'), 1]",
    "[__import__('ctypes').c_int(5), 1]",
    "[type('I', (), {'__index__': lambda s: 7})(), 1]",
    "[5, type('I', (), {'__index__': lambda s: 1})()]",
    "[type('J', (int,), {'__index__': lambda s: 99})(4), 1]",
    "[__import__('types').SimpleNamespace(__index__=lambda: 7), 1]",
    "type('S', (), {'__len__': lambda s: 2, '__getitem__': lambda s, i: (5, 1)[i]})()",
    "type('L', (list,), {})([5, 1])",
    "__import__('types').SimpleNamespace(__len__=lambda: 2, __getitem__=lambda i: 5)",
    "raise",
]

TEMPLATE = """
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaIndom, pmdaInstid, pmdaMetric
from pcp.pmapi import pmUnits

CASES = {cases!r}


class Gen(PMDA):
    def __init__(self):
        PMDA.__init__(self, "gen", 401)
        self.connect_pmcd()
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "zero"), pmdaInstid(5, "five"), pmdaInstid(2, "two")]))
        for item, (mtype, expr) in CASES.items():
            indom = self.indom(0) if isinstance(expr, list) else c_api.PM_INDOM_NULL
            self.add_metric("gen.m%d" % item, pmdaMetric(self.pmid(0, item), mtype, indom,
                            c_api.PM_SEM_INSTANT, pmUnits(0, 0, 0, 0, 0, 0)), "", "")
            self.add_metric("gen.pad%d" % item, pmdaMetric(self.pmid(1, item), c_api.PM_TYPE_U32,
                            c_api.PM_INDOM_NULL, c_api.PM_SEM_INSTANT, pmUnits(0, 0, 0, 0, 0, 0)), "", "")
        self.set_fetch_callback(self.cb)

    def cb(self, cluster, item, inst):
        if cluster == 1:
            return [0, 1]
        expr = CASES[item][1]
        if isinstance(expr, list):
            expr = expr[{{0: 0, 5: 1, 2: 2}}[inst]]
        if expr == "raise":
            raise ValueError("a callback that fails")
        return eval(expr)


Gen().run()
"""


#: an object with ``__index__`` (not an int) as a U64 value: the binding's
#: ``K`` format refuses it before Python 3.14 (PM_ERR_TYPE) and reads it from
#: 3.14 on; pmda-py compat reads it, as for every other integer type (its
#: bulk path's ``array("Q")`` calls ``__index__``; refusing it there would
#: mean a type check per value on the fetch hot path).  Kept out of the shape
#: sweep; test_u64_from_an_index_object asserts both sides.
INDEX_OBJECT = "[type('I', (), {'__index__': lambda s: 7})(), 1]"
KNOWN_DIFFERENCES = [("U64", INDEX_OBJECT)]


def undefined(mtype: str, expr: str) -> bool:
    """Returns the binding cannot answer: for a STRING metric, ``[n, code]``
    with ``n`` a positive C int and ``code`` not 1 makes it store a value it
    never set (the agent dies reading an uninitialised pointer; pmda-py
    compat answers PM_ERR_TYPE, see docs/compat.md)."""
    if mtype != "STRING" or expr == "raise":
        return False
    from types import SimpleNamespace

    from pmda_py.compat.constants import CPMAPI

    try:
        value = eval(expr, {"c_api": SimpleNamespace(**CPMAPI)})
    except Exception:
        return False
    if not isinstance(value, list) or len(value) != 2:
        return False
    n, code = value
    ints = all(isinstance(x, int) and -(2**31) <= x < 2**31 for x in (n, code))
    return ints and n > 0 and code != 1


def write(root: Path, cases: Sequence[Case]) -> tuple[Path, Path, str]:
    """The script, its PMNS and the dbpmda commands for ``(type, expr)``
    cases; ``expr`` a list of three: a metric of a three-instance indom,
    one expression per instance."""
    table = {k: (TYPES[t], e) for k, (t, e) in enumerate(cases)}
    script = root / "pmdagen.python"
    script.write_text(TEMPLATE.format(cases=table))
    lines = ["root {", "\tgen", "}", "gen {"]
    lines += [f"\tm{k}\t401:0:{k}\n\tpad{k}\t401:1:{k}" for k in table]
    lines.append("}")
    pmns = root / "gen.pmns"
    pmns.write_text("\n".join(lines) + "\n")
    keys = list(table)
    fetches = [" ".join(f"gen.m{k} gen.pad{k}" for k in keys[i : i + 10]) for i in range(0, len(keys), 10)]
    return script, pmns, "".join(f"fetch {names}\n" for names in fetches)


def values(transcript: str) -> dict[str, str]:
    """Each compared metric's answer in a dbpmda fetch dump (pads left out)."""
    out: dict[str, str] = {}
    current = None
    for line in transcript.splitlines():
        m = re.match(r"^  401\.\d+\.\d+ \((gen\.\w+)\): (.*)$", line)
        if m:
            current = m.group(1)
            out[current] = m.group(2)
        elif current and line.startswith("   "):
            out[current] += "\n" + line.strip()
        else:
            current = None
    return {k: v for k, v in out.items() if not k.startswith("gen.pad")}
