"""Odd and hostile tables and returns, compared with the real binding under
real dbpmda: what a script may hand the binding that no Debian PMDA does
(negative or repeated instance ids, names shared by several ids,
PM_TYPE_NOSUPPORT metrics), and what the callbacks are given then."""

from __future__ import annotations

from pathlib import Path

from tests.compat.harness import COMPAT, SYSTEM_PYTHON, bed, dbpmda, mask, require_binding

INSTANCES = r"""
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaIndom, pmdaInstid, pmdaMetric
from pcp.pmapi import pmUnits

CALLS = []


class Odd(PMDA):
    def __init__(self):
        PMDA.__init__(self, "odd", 412)
        self.connect_pmcd()
        u = pmUnits(0, 0, 0, 0, 0, 0)
        null, instant = c_api.PM_INDOM_NULL, c_api.PM_SEM_INSTANT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(-5, "neg"), pmdaInstid(3, "three"),
                                                 pmdaInstid(-2147483648, "min")]))
        self.add_indom(pmdaIndom(self.indom(1), [pmdaInstid(1, "a"), pmdaInstid(1, "b"), pmdaInstid(2, ""),
                                                 pmdaInstid(7, "x y"), pmdaInstid(9, "a")]))
        self.add_metric("odd.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, null, instant, u))
        self.add_metric("odd.neg", pmdaMetric(self.pmid(0, 1), c_api.PM_TYPE_U32, self.indom(0), instant, u))
        self.add_metric("odd.dup", pmdaMetric(self.pmid(0, 2), c_api.PM_TYPE_32, self.indom(1), instant, u))
        self.set_fetch_callback(self.fetch_cb)
        self.set_label_callback(self.label_cb)

    def label_cb(self, indom, inst):
        CALLS.append("L%d" % inst)
        return '{"i":%d}' % inst

    def fetch_cb(self, cluster, item, inst):
        if item == 0:
            text = ",".join(CALLS)
            del CALLS[:]
            return [text, 1]
        CALLS.append("%d[%d]" % (item, inst))
        return [inst if item == 1 else inst % 100, 1]


Odd().run()
"""

INSTANCE_COMMANDS = """fetch odd.neg
fetch odd.calls
label instances 412.0
fetch odd.calls
instance 412.0
instance 412.0 "neg"
instance 412.1
instance 412.1 1
instance 412.1 "a"
instance 412.1 "b"
instance 412.1 "x"
fetch odd.dup
fetch odd.calls
label instances 412.1
fetch odd.calls
"""


def test_instance_ids_as_the_binding_gives_and_lists_them(root: Path) -> None:
    """A negative instance id reaches the fetch and label callbacks as the
    unsigned int the binding passes (-5 is 4294967291); an id listed twice
    is listed twice and looked up by its first name, and a name given to
    two ids finds the first, as libpcp_pmda does."""
    require_binding()
    env = bed(root)
    script = root / "pmdaodd.python"
    script.write_text(INSTANCES)
    pmns = root / "odd.pmns"
    pmns.write_text("root {\n\todd\t412:*:*\n}\n")
    real = mask(dbpmda([SYSTEM_PYTHON], script, INSTANCE_COMMANDS, pmns, env, root / "real"))
    ours = mask(dbpmda(COMPAT, script, INSTANCE_COMMANDS, pmns, env, root / "ours"))
    assert 'value "1[4294967291],1[3],1[2147483648]"' in real, real
    assert 'value "L4294967291,L3,L2147483648"' in real, real
    assert '[  0] inst: 1 name: "a"\n[  1] inst: 1 name: "b"' in real, real
    assert ours == real


NOSUPPORT = r"""
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaIndom, pmdaInstid, pmdaMetric
from pcp.pmapi import pmUnits

CALLS = []


class NoSupport(PMDA):
    def __init__(self):
        PMDA.__init__(self, "ns", 413)
        self.connect_pmcd()
        u = pmUnits(0, 0, 0, 0, 0, 0)
        null, instant, nosupport = c_api.PM_INDOM_NULL, c_api.PM_SEM_INSTANT, c_api.PM_TYPE_NOSUPPORT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "zero"), pmdaInstid(1, "one")]))
        self.add_indom(pmdaIndom(self.indom(1), []))
        self.add_metric("ns.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, null, instant, u))
        self.add_metric("ns.value", pmdaMetric(self.pmid(0, 1), nosupport, null, instant, u))
        self.add_metric("ns.none", pmdaMetric(self.pmid(0, 2), nosupport, null, c_api.PM_SEM_COUNTER, u))
        self.add_metric("ns.error", pmdaMetric(self.pmid(0, 3), nosupport, null, instant, u))
        self.add_metric("ns.insts", pmdaMetric(self.pmid(0, 4), nosupport, self.indom(0), instant, u))
        self.add_metric("ns.empty", pmdaMetric(self.pmid(0, 5), nosupport, self.indom(1), instant, u))
        self.set_fetch_callback(self.fetch_cb)

    def fetch_cb(self, cluster, item, inst):
        if item == 0:
            text = ",".join(CALLS)
            del CALLS[:]
            return [text, 1]
        CALLS.append("%d[%d]" % (item, inst % 100))
        if item == 2:
            return None
        if item == 3:
            return [c_api.PM_ERR_INST, 0]
        return [1, 1]


NoSupport().run()
"""

NOSUPPORT_COMMANDS = """desc ns.value
fetch ns.value
fetch ns.none
fetch ns.error
fetch ns.insts
fetch ns.empty
fetch ns.calls
"""


def test_a_nosupport_metric_is_answered_as_the_binding_answers_it(root: Path) -> None:
    """A PM_TYPE_NOSUPPORT metric's callback is called, and its answer is
    the binding's: -ENOTSUP for a value, no values for None, the error it
    returned ignored, as the binding ignores it (not PM_ERR_APPVERSION,
    the engine's own answer for the type)."""
    require_binding()
    env = bed(root)
    script = root / "pmdans.python"
    script.write_text(NOSUPPORT)
    pmns = root / "ns.pmns"
    pmns.write_text("root {\n\tns\t413:*:*\n}\n")
    real = mask(dbpmda([SYSTEM_PYTHON], script, NOSUPPORT_COMMANDS, pmns, env, root / "real"))
    ours = mask(dbpmda(COMPAT, script, NOSUPPORT_COMMANDS, pmns, env, root / "ours"))
    assert "413.0.1 (<noname>): Operation not supported" in real, real
    assert "413.0.2 (<noname>): No values returned!" in real, real
    assert 'value "1[95],2[95],3[95],4[0],4[1]"' in real, real
    assert ours == real
