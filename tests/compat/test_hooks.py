"""The binding's hooks around a request, compared with the real binding
live: which callbacks run, in which order, with which arguments
(refresh_metrics, prefetch, refresh_all, refresh per cluster, instance), and
labels and notes (JSON text from the label callbacks, malformed included)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.compat.harness import COMPAT, SYSTEM_PYTHON, bed, dbpmda, mask, require_binding, write_pmns

HOOKS = r"""
import json
from ctypes import c_int
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaIndom, pmdaInstid, pmdaMetric
from pcp.pmapi import pmUnits

CALLS = []


class Hooks(PMDA):
    def __init__(self):
        PMDA.__init__(self, "hooks", 402)
        self.connect_pmcd()
        u = pmUnits(0, 0, 0, 0, 0, 0)
        insts = [pmdaInstid(1, "one"), pmdaInstid(3, "three three")]
        self.add_indom(pmdaIndom(self.indom(0), insts), "an indom", "its help")
        self.add_indom(pmdaIndom(self.indom(1), {"a": c_int(10), "b": c_int(20)}))
        self.add_metric("hooks.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, c_api.PM_INDOM_NULL,
                        c_api.PM_SEM_DISCRETE, u), "the calls so far", "")
        self.add_metric("hooks.a", pmdaMetric(self.pmid(3, 1), c_api.PM_TYPE_U32, self.indom(0), c_api.PM_SEM_COUNTER,
                        pmUnits(1, -1, 0, c_api.PM_SPACE_KBYTE, c_api.PM_TIME_SEC, 0)))
        instant, null = c_api.PM_SEM_INSTANT, c_api.PM_INDOM_NULL
        self.add_metric("hooks.b", pmdaMetric(self.pmid(5, 2), c_api.PM_TYPE_DOUBLE, self.indom(1), instant, u))
        self.add_metric("hooks.c", pmdaMetric(self.pmid(3, 3), c_api.PM_TYPE_64, null, instant, u))
        self.set_refresh_metrics(lambda: CALLS.append("rm"))
        self.set_fetch(lambda: CALLS.append("pre"))
        self.set_refresh_all(lambda clusters: CALLS.append("all" + json.dumps(clusters)))
        self.set_refresh(lambda cluster: CALLS.append("r%d" % cluster))
        self.set_instance(lambda serial: CALLS.append("i%d" % serial))
        self.set_fetch_callback(self.fetch_cb)
        self.set_label(self.label)
        self.set_notes(self.notes)
        self.set_label_callback(self.inst_label)
        self.set_notes_callback(self.inst_notes)

    def fetch_cb(self, cluster, item, inst):
        if item == 0:
            text = ",".join(CALLS)
            del CALLS[:]
            return [text, 1]
        CALLS.append("cb%d.%d[%d]" % (cluster, item, inst if inst < 2**31 else -1))
        return [inst, 1]

    def label(self, ident, kind):
        CALLS.append("label%d" % kind)  # (the instances level too: the binding asks, and drops the answer)
        if kind == c_api.PM_LABEL_INDOM and ident == self.indom(1):
            return '{"broken": '
        if kind == c_api.PM_LABEL_CLUSTER:
            return '{"cluster":%d,"nested":{"x":1,"y":[1,2]}}' % ident
        if kind == c_api.PM_LABEL_ITEM:
            return '{"item":"%s"}' % self.pmid_name_lookup(3, 1)
        if kind == c_api.PM_LABEL_DOMAIN:
            return "{}"
        return '{"indom":%d}' % ident

    def notes(self, ident, kind):
        return '{"note":true}' if kind == c_api.PM_LABEL_ITEM else "{}"

    def inst_label(self, indom, inst):
        name = self.inst_name_lookup(indom, inst)
        return '{"name":"%s","n":%d}' % (name, inst) if inst != 3 else "not json"

    def inst_notes(self, indom, inst):
        return '{"optional":"yes"}' if inst == 1 else ""


Hooks().run()
"""

COMMANDS = """fetch hooks.calls
fetch hooks.a hooks.c hooks.b
fetch hooks.calls
instance 402.0
instance 402.1
instance 402.0 "three"
fetch hooks.calls
desc hooks.a
text hooks.calls
text indom 402.0
text indom 402.1
fetch hooks.calls
label domain
label indom 402.0
label indom 402.1
label cluster 402.3
label item hooks.a
label item hooks.c
label instances 402.0
label instances 402.1
fetch hooks.calls
"""


def test_hooks_and_labels_as_the_binding(root: Path) -> None:
    require_binding()
    env = bed(root)
    script = root / "pmdahooks.python"
    script.write_text(HOOKS)
    pmns = write_pmns(
        root / "hooks.pmns", 402, {"hooks.calls": (0, 0), "hooks.a": (3, 1), "hooks.b": (5, 2), "hooks.c": (3, 3)}
    )
    real = mask(dbpmda([SYSTEM_PYTHON], script, COMMANDS, pmns, env, root / "real"))
    ours = mask(dbpmda(COMPAT, script, COMMANDS, pmns, env, root / "ours"))
    assert "pre" in real and "note" in real  # the binding ran the hooks
    # a listed difference (docs/compat.md): refresh_metrics runs before every
    # request (the binding skips LABEL requests); the calls of the label
    # requests are compared without it
    last = re.compile(r'(?s)(label instances 402\.1\n.*value ")([^"]*)(")')
    real = last.sub(lambda m: m.group(1) + re.sub(r"rm,", "", m.group(2)) + m.group(3), real)
    ours = last.sub(lambda m: m.group(1) + re.sub(r"rm,", "", m.group(2)) + m.group(3), ours)
    assert ours == real


NOTIFY = """
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaMetric
from pcp.pmapi import pmUnits


class Notify(PMDA):
    def __init__(self):
        PMDA.__init__(self, "nc", 404)
        self.connect_pmcd()
        self.n = 0
        self.add_metric("nc.n", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_U32, c_api.PM_INDOM_NULL,
                        c_api.PM_SEM_INSTANT, pmUnits(0, 0, 0, 0, 0, 0)))
        self.set_fetch(self.pre)
        self.set_fetch_callback(lambda c, i, inst: [self.n, 1])

    def pre(self):
        self.n += 1
        if self.n == 2:
            self.set_notify_change()


Notify().run()
"""


def test_notify_change_flags_the_next_result_once(root: Path) -> None:
    """set_notify_change: the next RESULT carries the change flags (dbpmda
    shows them as the timestamp's seconds), once.  The binding sets names
    (16) and labels (8), and so does compat."""
    require_binding()
    env = bed(root)
    script = root / "pmdanc.python"
    script.write_text(NOTIFY)
    pmns = root / "nc.pmns"
    pmns.write_text("root {\n\tnc\t404:*:*\n}\n")
    commands = "fetch 404.0.0\n" * 4

    def stamps(cmd: list[str], where: str) -> list[str]:
        out = dbpmda(cmd, script, commands, pmns, env, root / where)
        return re.findall(r"timestamp: (\d+)\.", out)

    assert stamps([SYSTEM_PYTHON], "real") == ["0", "24", "0", "0"]
    assert stamps(COMPAT, "ours") == ["0", "24", "0", "0"]


CLUSTERS = """
import json
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaIndom, pmdaInstid, pmdaMetric
from pcp.pmapi import pmUnits

CALLS = []


class Clusters(PMDA):
    def __init__(self):
        PMDA.__init__(self, "cl", 405)
        self.connect_pmcd()
        u = pmUnits(0, 0, 0, 0, 0, 0)
        null, instant = c_api.PM_INDOM_NULL, c_api.PM_SEM_INSTANT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(4, "four")]))
        self.add_metric("cl.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, null, c_api.PM_SEM_DISCRETE, u))
        self.add_metric("cl.a", pmdaMetric(self.pmid(3, 1), c_api.PM_TYPE_U32, null, instant, u))
        self.add_metric("cl.b", pmdaMetric(self.pmid(5, 2), c_api.PM_TYPE_U64, self.indom(0), instant, u))
        self.set_fetch(lambda: CALLS.append("pre"))
        self.set_refresh_all(lambda clusters: CALLS.append("all" + json.dumps(clusters)))
        self.set_refresh(lambda cluster: CALLS.append("r%d" % cluster))
        self.set_fetch_callback(self.fetch_cb)

    def fetch_cb(self, cluster, item, inst):
        if item == 0:
            text = ",".join(CALLS)
            del CALLS[:]
            return [text, 1]
        CALLS.append("cb%d.%d" % (cluster, item))
        return [item, 1]


Clusters().run()
"""

#: known and unknown PMIDs mixed (clusters repeated, out of order), only
#: unknown ones (one, several), other domains' PMIDs; each followed by the
#: calls it made
CLUSTER_COMMANDS = """fetch cl.calls
fetch cl.b 405.7.9 cl.a 405.3.4 405.5.8 405.9.1 405.7.2
fetch cl.calls
fetch 405.7.9 405.8.1 405.7.3 405.8.1
fetch cl.calls
fetch 405.4095.1
fetch cl.calls
fetch 406.6.1 cl.a 2.11.1
fetch cl.calls
"""


def test_refresh_clusters_of_unknown_pmids(root: Path) -> None:
    """refresh_all and refresh get the cluster of every requested PMID, in
    the order they first appear (unknown ones and other domains' included),
    and run for a FETCH of unknown PMIDs only (whose RESULT is PM_ERR_PMID
    for each)."""
    require_binding()
    env = bed(root)
    script = root / "pmdacl.python"
    script.write_text(CLUSTERS)
    pmns = write_pmns(root / "cl.pmns", 405, {"cl.calls": (0, 0), "cl.a": (3, 1), "cl.b": (5, 2)})
    real = mask(dbpmda([SYSTEM_PYTHON], script, CLUSTER_COMMANDS, pmns, env, root / "real"))
    ours = mask(dbpmda(COMPAT, script, CLUSTER_COMMANDS, pmns, env, root / "ours"))
    assert 'value "pre,all[5, 7, 3, 9],r5,r7,r3,r9,cb5.2,cb3.1,pre,all[0],r0"' in real, real
    assert 'value "pre,all[7, 8],r7,r8,pre,all[0],r0"' in real, real
    assert ours == real
