"""Odd tables a script may hand the binding, compared with it under real
dbpmda: metric types PCP does not define, indoms of another domain's
number, and a script's own view of its pmdaIndom objects."""

from __future__ import annotations

from pathlib import Path

from tests.compat.harness import ScriptPmda, under_both

ODD_TYPES = ScriptPmda(
    "ot",
    417,
    prelude="CALLS = []",
    init="""
        instant = c_api.PM_SEM_INSTANT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "zero"), pmdaInstid(1, "one")]))
        self.add_indom(pmdaIndom(self.indom(1), []))
        self.add_metric("ot.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, c_api.PM_INDOM_NULL, instant, u))
        for i, t in enumerate([99, 255, 11, -2, 2**31 - 1, 2**32 + 5]):
            self.add_metric("ot.t%d" % i, pmdaMetric(self.pmid(0, i + 1), t, c_api.PM_INDOM_NULL,
                                                     c_api.PM_SEM_COUNTER, pmUnits(1, 0, 0, 1, 0, 0)))
        self.add_metric("ot.none", pmdaMetric(self.pmid(1, 0), 99, self.indom(0), instant, u))
        self.add_metric("ot.error", pmdaMetric(self.pmid(1, 1), 99, self.indom(0), instant, u))
        self.add_metric("ot.raise", pmdaMetric(self.pmid(1, 2), 99, self.indom(0), instant, u))
        self.add_metric("ot.empty", pmdaMetric(self.pmid(1, 3), 99, self.indom(1), instant, u))
        self.set_fetch_callback(self.fetch_cb)
    """,
    methods="""
    def fetch_cb(self, cluster, item, inst):
        if (cluster, item) == (0, 0):
            text = ",".join(CALLS)
            del CALLS[:]
            return [text, 1]
        CALLS.append("%d.%d[%d]" % (cluster, item, inst % 100))
        if (cluster, item) == (1, 0):
            return None
        if (cluster, item) == (1, 1):
            return [c_api.PM_ERR_INST, 0]
        if (cluster, item) == (1, 2):
            raise ValueError("a fetch callback failed")
        return [7, 1]
    """,
)

ODD_TYPE_COMMANDS = (
    "".join(f"desc 417.0.{i}\nfetch 417.0.{i}\n" for i in range(1, 7))
    + "desc ot.none\nfetch ot.none ot.error ot.raise ot.empty\nfetch ot.t0 ot.calls\nfetch ot.calls\n"
    + "children ot\nname 417.0.1\npmid ot.t1\ntext 417.0.1\n"
)


def test_a_metric_of_a_type_pcp_does_not_define_is_kept(root: Path) -> None:
    """A pmdaMetric whose type number is no PM_TYPE_* (99, 255, 11, -2, a
    C int's wrap): the binding keeps it -- its DESC gives the number, its
    name is in the PMNS, its callback is called and answers as for
    PM_TYPE_NOSUPPORT (-ENOTSUP for a value, no values for None).  compat
    dropped it (PM_ERR_PMID, no name)."""
    real, ours = under_both(ODD_TYPES, ODD_TYPE_COMMANDS, root)
    assert "Data Type: ??? (99)  InDom: PM_INDOM_NULL 0xffffffff\n    Semantics: counter  Units: Kbyte" in real, real
    assert "417.0.1 (<noname>): Operation not supported" in real, real
    assert "417.1.0 (<noname>): No values returned!" in real, real
    assert ours == real
