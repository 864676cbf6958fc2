"""Better than the binding: a callback that overruns the deadline never
stalls the agent.  Its metrics answer PM_ERR_AGAIN once the deadline
passes; DESC, TEXT and INSTANCE are answered meanwhile, and a FETCH while
the callbacks are still busy answers PM_ERR_AGAIN at once (the binding
blocks in the callback, and pmcd drops an agent after 5 s)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.compat.harness import COMPAT, ScriptPmda, bed, dbpmda, under_compat, write_pmns
from tests.conftest import require

SLOW = """
import time
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaIndom, pmdaInstid, pmdaMetric
from pcp.pmapi import pmUnits


class Slow(PMDA):
    def __init__(self):
        PMDA.__init__(self, "slow", 403)
        self.connect_pmcd()
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "only")]), "one instance", "")
        u = pmUnits(0, 0, 0, 0, 0, 0)
        self.add_metric("slow.wait", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_U32, c_api.PM_INDOM_NULL,
                        c_api.PM_SEM_INSTANT, u), "sleeps 3 s", "")
        self.add_metric("slow.fast", pmdaMetric(self.pmid(0, 1), c_api.PM_TYPE_U32, self.indom(0),
                        c_api.PM_SEM_INSTANT, u), "answers at once", "")
        self.set_fetch_callback(self.cb)

    def cb(self, cluster, item, inst):
        if item == 0:
            time.sleep(3)
        return [item + 40, 1]


Slow().run()
"""

COMMANDS = """fetch slow.wait
desc slow.fast
text slow.fast
instance 403.0
fetch slow.fast
timer on
fetch slow.fast
timer off
wait 3
fetch slow.fast
"""


@pytest.mark.slow
def test_a_slow_callback_does_not_stall_the_agent(root: Path) -> None:
    require(os.path.exists("/usr/bin/dbpmda") or os.path.exists("/usr/lib/pcp/bin/dbpmda"), "dbpmda not installed")
    env = bed(root)
    env["PYPMDA_COMPAT_DEADLINE"] = "0.5"
    script = root / "pmdaslow.python"
    script.write_text(SLOW)
    pmns = write_pmns(root / "slow.pmns", 403, {"slow.wait": (0, 0), "slow.fast": (0, 1)})
    t0 = time.monotonic()
    out = dbpmda(COMPAT, script, COMMANDS, pmns, env, root / "run")
    elapsed = time.monotonic() - t0
    blocks = out.split("fetch slow.")
    assert "Try again. Information not currently available" in blocks[1], out  # the slow one: PM_ERR_AGAIN
    assert "Data Type: 32-bit unsigned int" in out and "[answers at once]" in out
    assert '[  0] inst: 0 name: "only"' in out
    # still busy: the next fetch answers PM_ERR_AGAIN at once, not after the sleep
    assert "Try again" in blocks[2], out
    timer = re.search(r"Timer: (\d+\.\d+) seconds", out)
    assert timer is not None and float(timer.group(1)) < 3, out
    # once the slow callback has returned, fetches are answered again
    assert "value 41" in blocks[-1], out
    log = (root / "run" / "slow.log").read_text()
    assert "table_timeout" in log
    assert elapsed < 30


SLOW_LABELS = ScriptPmda(
    "slowlab",
    404,
    prelude="import time",
    init="""
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "only")]), "one instance", "")
        self.add_metric("slowlab.wait", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_U32, c_api.PM_INDOM_NULL,
                        c_api.PM_SEM_INSTANT, u), "its labels take 3 s", "")
        self.add_metric("slowlab.fast", pmdaMetric(self.pmid(0, 1), c_api.PM_TYPE_U32, self.indom(0),
                        c_api.PM_SEM_INSTANT, u), "its labels come at once", "")
        self.set_fetch_callback(lambda cluster, item, inst: [item + 40, 1])
        self.set_label(self.label)
        self.set_label_callback(lambda indom, inst: '{"inst":%d}' % inst)
    """,
    methods="""
    def label(self, ident, type):
        if type == c_api.PM_LABEL_ITEM and ident == self.pmid(0, 0):
            time.sleep(3)
        return '{"ident":%d}' % (ident & 0xFFFF)
    """,
)

LABEL_COMMANDS = """label item 404.0.0
desc slowlab.fast
fetch slowlab.fast
label item 404.0.1
wait 3
label item 404.0.1
label instances 404.0
label indom 404.0
"""


@pytest.mark.slow
def test_a_slow_label_callback_does_not_stall_the_agent(root: Path) -> None:
    """The label callbacks run in the worker thread under the deadline too:
    a LABEL whose callback overruns it answers PM_ERR_AGAIN; DESC and FETCH
    are answered meanwhile (the FETCH's callbacks wait: PM_ERR_AGAIN at
    once), and so are labels once the slow callback has returned.  (They
    ran in the agent's main thread: the agent answered nothing for 3 s,
    and pmcd drops an agent after 5.)"""
    t0 = time.monotonic()
    out = under_compat(SLOW_LABELS, LABEL_COMMANDS, root, {"PYPMDA_COMPAT_DEADLINE": "0.5"})
    blocks = out.split("label ")
    assert "Try again. Information not currently available" in blocks[1], out  # the slow one: PM_ERR_AGAIN
    assert "Data Type: 32-bit unsigned int" in blocks[1], out  # the DESC, answered meanwhile
    assert "Try again" in blocks[2], out  # the callbacks still busy: another LABEL answers at once
    assert "ident=1" in blocks[3] and "inst=0" in blocks[4] and "ident=0" in blocks[5], out
    log = (root / "ours" / "slowlab.log").read_text()
    assert "table_timeout" in log and "labels" in log, log
    assert time.monotonic() - t0 < 30
