"""Three of docs/compat.md's promises, against the binding under real
dbpmda: a list indom replaced in the prefetch is seen by that same fetch
(the binding sees it a PDU late); a failing fetch callback is one -EAGAIN
and a ``callback_failed`` log line with the script's traceback;
``pmda_notready()``/``pmda_ready()`` after ``run()`` are logged and
ignored."""

from __future__ import annotations

import re
from pathlib import Path

from tests.compat.harness import COMPAT, SYSTEM_PYTHON, bed, dbpmda, require_binding, write_pmns

SCRIPT = r"""
import cpmapi as c_api
from pcp.pmda import PMDA, pmdaIndom, pmdaInstid, pmdaMetric
from pcp.pmapi import pmUnits


class Grow(PMDA):
    def __init__(self):
        PMDA.__init__(self, "grow", 403)
        self.connect_pmcd()
        self.n = 1
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "i0")]))
        u = pmUnits(0, 0, 0, 0, 0, 0)
        null, instant, u32 = c_api.PM_INDOM_NULL, c_api.PM_SEM_INSTANT, c_api.PM_TYPE_U32
        self.add_metric("grow.v", pmdaMetric(self.pmid(0, 0), u32, self.indom(0), instant, u))
        self.add_metric("grow.boom", pmdaMetric(self.pmid(0, 1), u32, null, instant, u))
        self.add_metric("grow.ready", pmdaMetric(self.pmid(0, 2), u32, null, instant, u))
        self.set_fetch(self.prefetch)
        self.set_fetch_callback(self.fetch_cb)

    def prefetch(self):
        self.n += 1
        self.replace_indom(self.indom(0), [pmdaInstid(i, "i%d" % i) for i in range(self.n)])

    def fetch_cb(self, cluster, item, inst):
        if item == 1:
            raise ZeroDivisionError("kaboom in the callback")
        if item == 2:
            self.pmda_notready()
            self.pmda_ready()
            return [7, 1]
        return [inst * 10 + 1, 1]


Grow().run()
"""

NAMES = {"grow.v": (0, 0), "grow.boom": (0, 1), "grow.ready": (0, 2)}


def _setup(root: Path) -> tuple[dict[str, str], Path, Path]:
    require_binding()
    env = bed(root)
    script = root / "pmdagrow.python"
    script.write_text(SCRIPT)
    return env, script, write_pmns(root / "grow.pmns", 403, NAMES)


def _insts(transcript: str) -> list[list[int]]:
    """The instance ids of each fetch's grow.v values."""
    results = transcript.split("__pmResult dump")[1:]
    return [[int(i) for i in re.findall(r"inst \[(\d+) or", r)] for r in results]


def test_a_list_indom_replaced_in_the_prefetch_is_seen_by_that_fetch(root: Path) -> None:
    env, script, pmns = _setup(root)
    commands = "fetch grow.v\nfetch grow.v\ninstance 403.0\n"
    ours = dbpmda(COMPAT, script, commands, pmns, env, root / "ours")
    assert _insts(ours) == [[0, 1], [0, 1, 2]], ours
    assert "value 11 " in ours and "value 21 " in ours
    assert '[  2] inst: 2 name: "i2"' in ours
    real = dbpmda([SYSTEM_PYTHON], script, commands, pmns, env, root / "real")
    assert _insts(real)[0] == [0], real  # the binding: the indom as it was before the prefetch


def test_a_failing_callback_and_ready_after_run_are_logged(root: Path) -> None:
    env, script, pmns = _setup(root)
    commands = "fetch grow.boom\nfetch grow.ready\nfetch grow.ready\nfetch grow.v\n"
    ours = dbpmda(COMPAT, script, commands, pmns, env, root / "ours")
    assert "403.0.1 (grow.boom): Resource temporarily unavailable" in ours, ours
    # notready/ready after run() change nothing: each fetch is answered
    assert ours.count("403.0.2 (grow.ready): numval: 1") == 2, ours
    assert "value 7 " in ours and "Error PDU" not in ours
    assert "403.0.0 (grow.v): numval: 5" in ours, ours  # the agent goes on (a prefetch per fetch)
    log = (root / "ours" / "grow.log").read_text()
    failed = [ln for ln in log.splitlines() if "callback_failed" in ln]
    assert len(failed) == 1 and "callback=fetch_callback" in failed[0] and "item=1" in failed[0], log
    after = log.split("callback_failed", 1)[1]
    assert 'raise ZeroDivisionError("kaboom in the callback")' in after, log
    assert "ZeroDivisionError: kaboom in the callback" in after, log
    assert log.count("notready_ignored") == 2 and log.count("ready_ignored") == 4, log
    real = dbpmda([SYSTEM_PYTHON], script, commands, pmns, env, root / "real")
    assert "Error PDU" in real  # the binding sends pmcd the state changes
