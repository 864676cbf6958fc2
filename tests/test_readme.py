"""The README's examples run: the table example is executed and served, and
the pytest plugin's fixtures work as documented."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pmda_py.testing.harness import open_table_pmda

pytest_plugins = ["pmda_py.testing.fixtures"]

README = Path(__file__).resolve().parents[1] / "README.md"


def _table_example() -> dict[str, object]:
    block = re.search(r"## Writing a table\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert block, "the README lost its table example"
    ns: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(block.group(1), "README.md", "exec"), ns)
    return ns


async def test_readme_table_example_serves() -> None:
    ns = _table_example()
    table = ns["Queues"]()  # type: ignore[operator]
    async with open_table_pmda(table, mount="queues", domain=250) as pmda:
        values = await pmda.fetch_values(["queues.depth", "queues.limit"])
        assert values["queues.depth"] == {0: 3, 1: 0}
        assert values["queues.limit"] == {0: 100, 1: 100}
        p = await pmda.pmid("queues.limit")
        from pmda_py.pmapi import PmType
        from pmda_py.wire import ValueSet

        assert await pmda.store([ValueSet.of(p, PmType.U32, [(1, 500)])]) == 0
        assert (await pmda.fetch_values(["queues.limit"]))["queues.limit"] == {0: 100, 1: 500}
        # min/max declared on the metric: refused before the table sees it
        assert await pmda.store([ValueSet.of(p, PmType.U32, [(1, 0)])]) == -12400
        assert await pmda.oneline(await pmda.pmid("queues.depth")) == "messages waiting"


async def test_pmda_command_fixture(pmda_command, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "simple.conf").write_text("sec\n")
    cmd = [sys.executable, "-m", "pmda_py", "run", "-d", "253", "--table", "simple",
           "-l", str(tmp_path / "l.log"), "--state-dir", str(tmp_path)]  # fmt: skip
    async with pmda_command(cmd) as pmda:
        assert (await pmda.fetch_values(["simple.numfetch"]))["simple.numfetch"] == 1


async def test_table_pmda_fixture(table_pmda) -> None:  # type: ignore[no-untyped-def]
    ns = _table_example()
    async with table_pmda(ns["Queues"](), mount="q", domain=250) as pmda:  # type: ignore[operator]
        assert (await pmda.fetch_values(["q.depth"]))["q.depth"] == {0: 3, 1: 0}
