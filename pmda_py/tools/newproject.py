"""``pmda-py new NAME``: a ready project for a third-party agent.

It writes ``NAME/`` (or ``--dir``) holding ``pyproject.toml`` (the table
registered as an entry point in the ``pmda_py.tables`` group, pytest set up
with pmda_py's plugin), the package ``NAME`` with one table, its test, and
``pmda.conf`` (the agent's config: name, domain, the table)::

    pmda-py new demo && cd demo && pip install -e . && pytest
    sudo pmda-py install .          # into pmcd: pmda.conf, the package in the agent's virtualenv

Only the standard library is imported here.
"""

from __future__ import annotations

import argparse
import keyword
import re
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main", "new_main", "project_files"]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_RESERVED = {"pmda_py", "pmda", "tests", "test", "pmcd", "pcp"}

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
description = "The {name} PCP agent: a pmda_py table"
requires-python = ">=3.9"
dependencies = ["pmda_py"]

[project.optional-dependencies]
test = ["pytest>=7", "pytest-trio>=0.8"]

# `table = {name}` in pmda.conf finds the table through this entry point
[project.entry-points."pmda_py.tables"]
{name} = "{name}.table:{cls}"

[tool.setuptools.packages.find]
include = ["{name}*"]

[tool.pytest.ini_options]
testpaths = ["tests"]
trio_mode = true
addopts = "-p pmda_py.testing.fixtures"
"""

_INIT = '''\
"""The {name} agent's tables (pmda_py)."""
'''

_TABLE = '''\
"""The {name} table: replace its metrics with yours.

Every metric has a PMID (cluster, item), a type and semantics; an InDom
gives a metric instances.  fetch() answers one request for all of the
table's requested metrics at once.
"""

from __future__ import annotations

import time

from pmda_py.pmapi import PmSem, PmType
from pmda_py.table import FetchRequest, FetchResult, InDom, Metric, Table, TableContext, units


class {cls}(Table):
    name = "{name}"

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.fetches = 0
        self.colour = InDom(0, {{0: "red", 1: "green", 2: "blue"}}, oneline="colours")
        self.uptime = Metric("uptime", cluster=0, item=0, type=PmType.DOUBLE, sem=PmSem.INSTANT,
                             units=units(time=1, scale_time=3), oneline="seconds since the agent started")  # fmt: skip
        self.count = Metric("count", cluster=0, item=1, type=PmType.U64, sem=PmSem.COUNTER, indom=self.colour,
                            oneline="fetches so far, per colour")  # fmt: skip

    async def startup(self, context: TableContext) -> None:
        context.log.info("{name}_started", mount=context.mount)

    async def fetch(self, request: FetchRequest) -> FetchResult:
        self.fetches += 1
        return {{
            self.uptime: time.monotonic() - self.started,
            self.count: {{inst: self.fetches for inst in self.colour.instances}},
        }}
'''

_TEST = '''\
"""The {name} table, served in-process and by `pmda-py run` through its
entry point (the fixtures come from pmda_py's pytest plugin)."""

from __future__ import annotations

from {name}.table import {cls}


async def test_values_in_process(table_pmda):
    async with table_pmda({cls}(), mount="{name}", domain={domain}) as pmda:
        values = await pmda.fetch_values(["{name}.uptime", "{name}.count"])
        assert values["{name}.uptime"] >= 0
        assert values["{name}.count"] == {{0: 1, 1: 1, 2: 1}}


async def test_entry_point_served_by_pmda_py(pmda_command):
    async with pmda_command(["pmda-py", "run", "-d", "{domain}", "--table", "{name}", "-l", "-"]) as pmda:
        values = await pmda.fetch_values(["{name}.count"])
        assert values["{name}.count"] == {{0: 1, 1: 1, 2: 1}}
'''

_CONF = """\
# The {name} agent's config: `pmda-py install` installs it as
# $PCP_SYSCONF_DIR/{name}/{name}.conf (see pmda_py's etc/pypmda.conf for every key).
[pmda]
name = {name}
domain = {domain}

[table {name}]
table = {name}
mount = {name}
"""

_README = """\
# {name}

A Performance Co-Pilot agent written with pmda_py.

    pip install -e . && pytest       # test the table
    sudo pmda-py install .           # install it into pmcd (pmda.conf, domain {domain})
    pminfo -f {name}
    sudo pmda-py remove -n {name}
"""


def _class_name(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) + "Table"


def project_files(name: str, domain: int) -> dict[str, str]:
    """The project's files: relative path -> text."""
    fill = {"name": name, "cls": _class_name(name), "domain": domain}
    return {
        "pyproject.toml": _PYPROJECT.format(**fill),
        f"{name}/__init__.py": _INIT.format(**fill),
        f"{name}/table.py": _TABLE.format(**fill),
        "tests/test_table.py": _TEST.format(**fill),
        "pmda.conf": _CONF.format(**fill),
        "README.md": _README.format(**fill),
    }


def new_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="pmda-py new", description="Write a ready project for a third-party agent.")
    p.add_argument("name", help="agent and package name (a letter, then letters, digits, _)")
    p.add_argument("--dir", help="where to write it (default ./NAME; must not exist or be empty)")
    p.add_argument("-d", "--domain", type=int, default=400, help="domain number in pmda.conf (default %(default)s)")
    ns = p.parse_args(list(argv))
    name: str = ns.name
    if not _NAME.fullmatch(name) or keyword.iskeyword(name) or name.lower() in _RESERVED:
        print(f"pmda-py new: {name!r} cannot name an agent and its package", file=sys.stderr)
        return 2
    if not 1 <= ns.domain <= 510:
        print(f"pmda-py new: domain {ns.domain} out of range 1-510", file=sys.stderr)
        return 2
    top = Path(ns.dir or name)
    if top.exists() and (not top.is_dir() or any(top.iterdir())):
        print(f"pmda-py new: {top} exists and is not an empty directory", file=sys.stderr)
        return 1
    try:
        for rel, text in project_files(name, ns.domain).items():
            path = top / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    except OSError as err:
        print(f"pmda-py new: cannot write {err.filename or top}: {err.strerror or err}", file=sys.stderr)
        return 1
    print(f"wrote {top}/: cd {top} && pip install -e . && pytest; then sudo pmda-py install .")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return new_main(list(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
