"""The package's layer contract, checked on the source (an import-linter
equivalent with no extra dependency):

    errors <- pmapi <- wire <- session <- dispatch <- runtime <- cli

with the PMNS, help-file, config and MMV reader code beside ``wire``, the
table API beside ``session``, the built-in tables beside ``dispatch`` and
the tools (installer, demo, testing) on top.  A module imports only modules
of a lower layer, or of its own package.  The sans-IO core (wire, session,
the MMV reader and model, the table API, the dispatcher) never imports trio,
and no production module imports ``pmda_py.testing`` (``demo`` drives the
daemon through the harness, as a user would).  The table API speaks the
author's language: it imports nothing of ``pmda_py.wire`` (values are Python
values; the dispatcher turns them into PDUs)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "pmda_py"

#: module (or package prefix) -> layer; the longest matching prefix wins
LAYERS: dict[str, int] = {
    "pmda_py.errors": 0,
    "pmda_py.safefile": -2,  # how files are written and read (os only; below pcpversion, which reads pcp.conf by it)
    "pmda_py.inotify": 0,  # inotify watches through ctypes (os only): MMV directory, socket file
    "pmda_py.malloc": 0,  # glibc's malloc through ctypes: tuned for big replies, trimmed after a burst
    "pmda_py.pcpversion": -1,  # which PCP is installed (pcp.conf): texts and behaviour follow it
    "pmda_py.pmapi": 1,
    "pmda_py.wire": 2,
    "pmda_py.namespace": 2,
    "pmda_py.helpfile": 2,
    "pmda_py.config": 2,
    "pmda_py.logconfig": 2,
    "pmda_py.pcplabels": 1,  # libpcp's label parser (MMV label records, compat scripts' labels)
    "pmda_py.mmv": 2,  # MMV files, pmdammv's model, the scanner thread and watcher: below dispatch, no trio
    "pmda_py.mmv.table": 4,  # the drop-in table sits with the tables
    "pmda_py.stats": 2,
    "pmda_py.pmdacache": 2,  # libpcp_pmda's instance-cache files (the table API's persistent indoms)
    "pmda_py.session": 3,
    "pmda_py.table": 3,
    "pmda_py.dispatch": 4,
    "pmda_py.tables": 4,
    "pmda_py.openmetrics": 4,  # the OpenMetrics table, its sources, scraper and workers (the rest: NO_TRIO)
    "pmda_py.runtime": 5,  # pmda-py run: the only trio part of the core (pump, channels, admission, loader)
    # the tools on top: Install-time generators, pmda-py install/remove/new, the demo
    # (which drives the daemon through the testing client)
    "pmda_py.tools": 7,
    "pmda_py.cli": 6,
    "pmda_py.compat": 6,  # pmda-py compat: pcp.pmda scripts on the daemon's engine
    "pmda_py.__main__": 7,
    "pmda_py.testing": 6,  # client, in-process harness, fixtures, dbpmda: beside the command line
    "pmda_py": 6,  # the package's own __init__: the public API re-exports
}
NO_TRIO = (
    "pmda_py.inotify",
    "pmda_py.malloc",
    "pmda_py.wire",
    "pmda_py.session",
    "pmda_py.pcplabels",
    "pmda_py.mmv.layout",
    "pmda_py.mmv.regions",
    "pmda_py.mmv.reader",
    "pmda_py.mmv.model",
    "pmda_py.mmv.scanner",
    "pmda_py.mmv.watch",
    "pmda_py.openmetrics.exposition",
    "pmda_py.openmetrics.decode",
    "pmda_py.openmetrics.names",
    "pmda_py.openmetrics.labels",
    "pmda_py.openmetrics.metadata",
    "pmda_py.openmetrics.model",
    "pmda_py.openmetrics.digest",
    "pmda_py.openmetrics.records",
    "pmda_py.openmetrics.state",
    "pmda_py.openmetrics.answers",
    "pmda_py.openmetrics.control",
    "pmda_py.table",
    "pmda_py.dispatch",
    "pmda_py.namespace",
    "pmda_py.errors",
    "pmda_py.pmapi",
    "pmda_py.config",
    "pmda_py.helpfile",
    "pmda_py.pmdacache",
)

#: modules that never import the wire layer, though it is below them
NO_WIRE = ("pmda_py.table",)


def _name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> tuple[str, int]:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return best, LAYERS[best]


def _imports(path: Path) -> set[str]:
    return _imports_of(path.read_text(), _name(path), path.name == "__init__.py")


def _imports_of(text: str, module: str, is_package: bool) -> set[str]:
    """Every module ``module`` imports (``from a import b`` gives ``a.b`` when
    that is a module of ours, else ``a``)."""
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(text, module)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                candidate = f"{base}.{a.name}"
                mod_path = REPO.joinpath(*candidate.split("."))
                out.add(candidate if mod_path.with_suffix(".py").exists() or mod_path.is_dir() else base)
    return out


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_layers(path: Path) -> None:
    module = _name(path)
    group, layer = _layer(module)
    bad = []
    for dep in sorted(_imports(path)):
        top = dep.split(".")[0]
        if top != "pmda_py":
            if top == "trio" and any(module == p or module.startswith(p + ".") for p in NO_TRIO):
                bad.append(f"{dep} (the sans-IO core never imports trio)")
            continue
        if dep.startswith("pmda_py.testing") and not module.startswith(("pmda_py.testing", "pmda_py.tools.demo")):
            bad.append(f"{dep} (production code never imports testing)")
            continue
        if (dep == "pmda_py.wire" or dep.startswith("pmda_py.wire.")) and module in NO_WIRE:
            bad.append(f"{dep} (the table API exposes no wire type)")
            continue
        dep_group, dep_layer = _layer(dep)
        if dep_group == group or dep_layer < layer:
            continue
        bad.append(f"{dep} (layer {dep_layer} from layer {layer})")
    assert bad == [], f"{module} imports {bad}"


def test_every_module_has_a_layer() -> None:
    assert len(MODULES) > 20
    for path in MODULES:
        is_root = path == PACKAGE / "__init__.py"
        assert (_layer(_name(path))[0] == "pmda_py") == is_root, f"{_name(path)} has no layer in LAYERS"


def test_the_contract_can_fail() -> None:
    """The checker sees the violations of a wire module that imports trio
    and the dispatcher."""
    probe = _imports_of(
        "import trio\nfrom pmda_py.dispatch import Dispatcher\nfrom . import pdus\n", "pmda_py.wire._probe", False
    )
    assert probe == {"trio", "pmda_py.dispatch", "pmda_py.wire.pdus"}
    assert _layer("pmda_py.dispatch")[1] > _layer("pmda_py.wire._probe")[1]
    assert any("pmda_py.wire._probe".startswith(p + ".") for p in NO_TRIO)


def test_the_table_api_names_no_wire_type() -> None:
    """Nothing the table API exports comes from the wire layer, and the
    checker sees a wire import in it (the one it had: ValueSet, PackedColumn)."""
    import pmda_py.table as api

    leaked = [n for n in api.__all__ if getattr(getattr(api, n), "__module__", "").startswith("pmda_py.wire")]
    assert leaked == []
    probe = _imports_of(
        "from pmda_py.wire import ValueSet\nfrom pmda_py.wire.result import PackedColumn\n", "pmda_py.table", False
    )
    assert probe == {"pmda_py.wire", "pmda_py.wire.result"}
    assert all(dep.startswith("pmda_py.wire") for dep in probe) and "pmda_py.table" in NO_WIRE


#: the only modules that may import trio: the runtime, the tables (they
#: await their own I/O), the OpenMetrics scraper's parts, and the tools on
#: top of the daemon (the compat agent, the testing harness, the demo)
TRIO_ALLOWED = (
    "pmda_py.runtime",
    "pmda_py.tables",
    "pmda_py.mmv.table",
    "pmda_py.openmetrics.table",
    "pmda_py.openmetrics.scheduler",
    "pmda_py.openmetrics.sources",
    "pmda_py.openmetrics.scrape",
    "pmda_py.openmetrics.pool",
    "pmda_py.openmetrics.procs",
    "pmda_py.compat",
    "pmda_py.testing",
    "pmda_py.tools.demo",
)


def _trio_allowed(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in TRIO_ALLOWED)


def test_only_the_runtime_tables_and_scraper_import_trio() -> None:
    users = [_name(p) for p in MODULES if any(d.split(".")[0] == "trio" for d in _imports(p))]
    assert "pmda_py.runtime.pump" in users  # the check sees trio imports at all
    assert [m for m in users if not _trio_allowed(m)] == []
    assert not _trio_allowed("pmda_py.dispatch.dispatcher") and not _trio_allowed("pmda_py.session")
