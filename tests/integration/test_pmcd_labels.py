"""Labels of a several-table agent through a real pmcd (``pminfo -l``):
``{"agent": NAME}`` and the config's ``[pmda] labels`` on every metric, as
libpcp gives an agent's domain; each table's own labels (its
``domain_labels``, its ``cluster_labels``) only on that table's metrics."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_line
from tests.conftest import REPO
from tests.integration.pcpbed import PrivatePmcd

pytestmark = pytest.mark.pcp

CONF = """\
[pmda]
name = pypmda
domain = 310
labels = {{"site": "lab"}}
pythonpath = {repo}

[table simple]
table = simple
mount = pypmda.simple

[table control]
table = control
mount = pypmda.control

[table labelled]
table = tests.tables.labelled:Labelled
mount = pypmda.labelled
"""


def _labels(out: str) -> dict[str, dict[str, object]]:
    """``pminfo -l``: each metric's (first) label set."""
    found: dict[str, dict[str, object]] = {}
    metric = ""
    for line in out.splitlines():
        if line and not line.startswith(" "):
            metric = line.strip()
        elif m := re.match(r"\s+(?:inst \[.*?\] )?labels (\{.*\})$", line):
            found.setdefault(metric, json.loads(m.group(1)))
    return found


@pytest.mark.parametrize("config", ["shipped", "labelled"])
def test_agent_label_on_every_metric_table_labels_on_their_own(pcp_env: dict[str, str], config: str) -> None:
    """``shipped``: etc/pypmda.conf as ./Install installs it (simple, control,
    the example table); ``labelled``: plus ``[pmda] labels`` and a table
    with labels of its own."""
    root = Path(tempfile.mkdtemp(prefix="pmda_py-labels-"))
    root.chmod(0o755)
    conf = root / "pypmda.conf"
    if config == "shipped":
        shutil.copy(REPO / "etc" / "pypmda.conf", conf)
        shutil.copy(REPO / "etc" / "example_table.py", root)
        expect_tables, site = {"simple", "control", "loadavg"}, None
    else:
        conf.write_text(CONF.format(repo=REPO))
        expect_tables, site = {"simple", "control", "labelled"}, "lab"
    line = "pypmda 310 pipe binary " + pmda_py_line("run", "-c", conf, "-l", root / "pmda.log")
    pmcd = PrivatePmcd(root, [line], "root {\n    pypmda\t310:*:*\n}\n", env=pcp_env)
    try:
        pmcd.start("pypmda.control.pid")
        labels = _labels(pmcd.tool("pminfo", "-l", "pypmda").stdout)
    finally:
        pmcd.stop()
        shutil.rmtree(root, ignore_errors=True)
    tables = {name.split(".")[1] for name in labels}
    assert tables == expect_tables, labels
    for name, got in labels.items():
        table = name.split(".")[1]
        assert got.get("agent") == "pypmda" and got.get("site") == site, (name, got)
        assert ("role" in got) == (table == "simple"), (name, got)
        assert ("team" in got) == (table == "labelled"), (name, got)
        assert ("tier" in got) == (name == "pypmda.labelled.two"), (name, got)
    assert labels["pypmda.simple.numfetch"]["role"] == "testing"
