"""Run a pcp.pmda PMDA script under real dbpmda twice -- with PCP's binding
(``/usr/bin/python3 SCRIPT``) and with ``pmda-py compat SCRIPT`` -- and
compare the transcripts after masking what changes from run to run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

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
