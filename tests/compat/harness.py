"""Run a pcp.pmda PMDA script under real dbpmda twice -- with PCP's binding
(``/usr/bin/python3 SCRIPT``) and with ``pmda-py compat SCRIPT`` -- and
compare the transcripts after masking what changes from run to run; a test's
own script of one PMDA class is a :class:`ScriptPmda`."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent, indent

from pmda_py.testing.support import pmda_py_argv
from tests.conftest import require
from tests.integration.pcpbed import NEWHELP, mask_simple_times

SYSTEM_PYTHON = "/usr/bin/python3"
PMDAS = Path("/var/lib/pcp/pmdas")
COMPAT = pmda_py_argv("compat")


def require_binding() -> None:
    """dbpmda and the real binding (python3-pcp for the system python3)."""
    missing = []
    if shutil.which("dbpmda") is None:
        missing.append("dbpmda")
    if (
        not os.path.exists(SYSTEM_PYTHON)
        or subprocess.run([SYSTEM_PYTHON, "-c", "import pcp.pmda"], capture_output=True).returncode
    ):
        missing.append("python3-pcp for /usr/bin/python3")
    require(not missing, f"REAL PCP NOT AVAILABLE ({', '.join(missing)}): run scripts/install-pcp")


def require_script(name: str) -> Path:
    """The Debian-installed script of PMDA ``name``."""
    require_binding()
    script = PMDAS / name / f"pmda{name}.python"
    require(script.exists(), f"{script} is not installed (Debian's pcp package)")
    return script


def bed(root: Path) -> dict[str, str]:
    """A private PCP_PMDAS_DIR and PCP_VAR_DIR (world-writable: the PMDAs
    drop to the pcp user), as environment overrides."""
    pmdas, var = root / "pmdas", root / "var"
    for d in (root, pmdas, var, var / "config", var / "config" / "pmda"):
        d.mkdir(parents=True, exist_ok=True)
        d.chmod(0o777)
    if not (var / "pmns").exists():  # pmcpp finds <stdpmid> there
        (var / "pmns").symlink_to("/var/lib/pcp/pmns")
    return {"PCP_PMDAS_DIR": str(pmdas), "PCP_VAR_DIR": str(var)}


def compiled_help(env: dict[str, str], name: str, domain: int, metrics: str | None = None) -> None:
    """``PCP_PMDAS_DIR/NAME/help`` and its newhelp index, from the installed
    help source (``@ NAME.x`` lines renumbered to the domain)."""
    src = PMDAS / name
    d = Path(env["PCP_PMDAS_DIR"]) / name
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o777)
    text = (src / "help").read_text()
    text = re.sub(rf"^@ {name.upper()}\.", f"@ {domain}.", text, flags=re.M)
    shutil.copy(src / "help", d / "help")
    subprocess.run(
        [NEWHELP, "-n", str(metrics or src / "root"), "-o", str(d / "help")], input=text, text=True, check=True
    )


def mask(text: str) -> str:
    text = re.sub(r"(?m)^open pipe .*\n(Start \S+ PMDA: .*\n)?", "", text)
    text = re.sub(r"dump from 0x[0-9a-f]+", "dump from ADDR", text)
    text = re.sub(r"(?m)^(Connection: +daemon \(pid: )\d+\)$", r"\1PID)", text)
    text = re.sub(r"(?m)^Timer: \d+\.\d+ seconds$", "Timer: T seconds", text)
    # the old value in a store dialogue of simple's clock-driven metrics
    text = re.sub(r"(?m)^(253\.(?:1\.[23]|2\.4)(?: \[\d+\])?: )\S+ ->", r"\1OLD ->", text)
    return mask_simple_times(text)


def dbpmda(
    cmd: list[str],
    script: Path,
    commands: str,
    pmns: Path | str,
    env: dict[str, str],
    cwd: Path,
    args: tuple[str, ...] = (),
) -> str:
    """dbpmda's stdout and stderr for ``commands`` against ``cmd SCRIPT ARGS``."""
    cwd.mkdir(parents=True, exist_ok=True)
    cwd.chmod(0o777)
    line = " ".join([*cmd, str(script), *args])
    r = subprocess.run(
        ["dbpmda", "-e", "-n", str(pmns)],
        input=f"open pipe {line}\n{commands}",
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=cwd,
        timeout=60,
        errors="replace",
    )
    return r.stdout + r.stderr


def both(
    script: Path, commands: str, pmns: Path | str, env: dict[str, str], root: Path, args: tuple[str, ...] = ()
) -> tuple[str, str]:
    """(binding, compat) transcripts, masked."""
    real = dbpmda([SYSTEM_PYTHON], script, commands, pmns, env, root / "real", args)
    ours = dbpmda(COMPAT, script, commands, pmns, env, root / "ours", args)
    return mask(real), mask(ours)


#: what every :class:`ScriptPmda` imports
_IMPORTS = """import cpmapi as c_api
from pcp.pmda import PMDA, pmdaIndom, pmdaInstid, pmdaMetric
from pcp.pmapi import pmUnits
"""


@dataclass(frozen=True)
class ScriptPmda:
    """A test's pcp.pmda script of PMDA ``name`` (its metrics' prefix too)
    in ``domain``, but for what every such script says: the imports
    (``c_api``, ``PMDA``, ``pmdaIndom``, ``pmdaInstid``, ``pmdaMetric``,
    ``pmUnits``), then the module's ``prelude``; the PMDA class, whose
    ``__init__`` makes the PMDA, connects to pmcd and names dimensionless
    units ``u`` before its ``init``, and its other ``methods``; last the line
    running it.  Each text is dedented, then indented to its place."""

    name: str
    domain: int
    init: str
    methods: str = ""
    prelude: str = ""

    def text(self) -> str:
        def block(text: str, margin: int) -> str:
            return indent(dedent(text).strip("\n"), " " * margin)

        return (
            f"{_IMPORTS}\n{block(self.prelude, 0)}\n\n\n"
            "class Script(PMDA):\n"
            "    def __init__(self):\n"
            f'        PMDA.__init__(self, "{self.name}", {self.domain})\n'
            "        self.connect_pmcd()\n"
            "        u = pmUnits(0, 0, 0, 0, 0, 0)\n"
            f"{block(self.init, 8)}\n\n"
            f"{block(self.methods, 4)}\n\n\n"
            "Script().run()\n"
        )

    def write(self, root: Path) -> tuple[Path, Path]:
        """The script and a PMNS of its domain for dbpmda, written in ``root``."""
        script = root / f"pmda{self.name}.python"
        script.write_text(self.text())
        pmns = root / f"{self.name}.pmns"
        pmns.write_text(f"root {{\n\t{self.name}\t{self.domain}:*:*\n}}\n")
        return script, pmns


def under_both(pmda: ScriptPmda, commands: str, root: Path, *, own_var_dirs: bool = False) -> tuple[str, str]:
    """``commands`` against ``pmda`` under real dbpmda, with PCP's binding and
    then with compat: (binding, compat) transcripts, masked.  The runs share
    a PCP_VAR_DIR in ``root``, or each has its own (``own_var_dirs``: what
    one writes there is not the other's)."""
    require_binding()
    script, pmns = pmda.write(root)
    if not own_var_dirs:
        return both(script, commands, pmns, bed(root), root)
    real = dbpmda([SYSTEM_PYTHON], script, commands, pmns, bed(root / "real"), root / "real" / "run")
    ours = dbpmda(COMPAT, script, commands, pmns, bed(root / "ours"), root / "ours" / "run")
    return mask(real), mask(ours)


def under_compat(pmda: ScriptPmda, commands: str, root: Path, env: Mapping[str, str] | None = None) -> str:
    """``commands`` against ``pmda`` under real dbpmda with compat alone (its
    environment ``env`` besides the PCP_VAR_DIR in ``root``): the transcript,
    not masked; the run's files (its log) are in ``root / "ours"``."""
    require_binding()
    environment = {**bed(root), **(env or {})}
    script, pmns = pmda.write(root)
    return dbpmda(COMPAT, script, commands, pmns, environment, root / "ours")


def write_pmns(path: Path, domain: int, names: dict[str, tuple[int, int]]) -> Path:
    """A PMNS file of ``{name: (cluster, item)}`` for dbpmda ``-n``."""
    tree: dict[str, object] = {}
    for name, (cluster, item) in names.items():
        node = tree
        parts = name.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})  # type: ignore[assignment]
        node[parts[-1]] = f"{domain}:{cluster}:{item}"
    lines: list[str] = []

    def emit(label: str, node: dict[str, object]) -> None:
        lines.append(f"{label} {{")
        for k, v in node.items():
            lines.append(f"\t{k}\t{v}" if isinstance(v, str) else f"\t{k}")
        lines.append("}")
        for k, v in node.items():
            if isinstance(v, dict):
                emit(f"{label}.{k}" if label != "root" else k, v)

    emit("root", tree)
    path.write_text("\n".join(lines) + "\n")
    return path
