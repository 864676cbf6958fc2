"""``pmda-py install`` and ``pmda-py remove``: put an agent into pmcd (or take
it out) from wherever pmda_py is installed, with table packages of its own.

Both run the one implementation, the shell scripts shipped in the package
(``pmda_py/pcp/Install`` and ``Remove``, on PCP's pmdaproc.sh); a
checkout's ``./Install`` and ``./Remove`` are thin wrappers over the same
scripts.  The options are the scripts' environment variables (an option
given wins over the variable)::

    pmda-py install [-n NAME] [-d DOMAIN] [-t pipe|inet|ipv6|unix] [-a ADDRESS]
                    [-c CONFIG] [--mmv | --openmetrics] [--needinstall]
                    [--python PYTHON] [--source SPEC] [--pip-arg OPTION ...] [PACKAGE ...]
    pmda-py remove  [-n NAME] [--mmv | --openmetrics]

Each PACKAGE (a project directory, a wheel or a requirement) is pip
installed into the agent's virtualenv next to pmda_py, so its tables (entry
points in ``pmda_py.tables``) are found there.  A project directory made
by ``pmda-py new`` holds ``pmda.conf``: it is the config when ``-c`` is not
given, and its ``[pmda] name`` and ``domain`` are the defaults of ``-n`` and
``-d``.  ``--source`` says what pip installs as pmda_py itself: by default
the checkout this pmda_py runs from, else ``pmda_py==VERSION``.  Each
``--pip-arg`` passes one pip option, dashes and all (``--pip-arg --no-index
--pip-arg --find-links=DIR``).

Only the standard library is imported here.
"""

from __future__ import annotations

import argparse
import configparser
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["default_source", "install_main", "remove_main", "script"]

_PACKAGE = Path(__file__).resolve().parent.parent


def script(name: str) -> str:
    """The shipped ``Install`` or ``Remove``."""
    return str(_PACKAGE / "pcp" / name)


def default_source() -> str:
    """What pip installs as pmda_py: this checkout, or this version."""
    root = _PACKAGE.parent
    pyproject = root / "pyproject.toml"
    try:
        if 'name = "pmda_py"' in pyproject.read_text(encoding="utf-8"):
            return str(root)
    except OSError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"pmda_py=={version('pmda_py')}"
    except PackageNotFoundError:  # pragma: no cover - neither a checkout nor installed
        return "pmda_py"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--name", help="agent name (PYPMDA_NAME; default pypmda, or the project's [pmda] name)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--mmv", action="store_true", help="the MMV drop-in in place of pmdammv (PYPMDA_MMV=1)")
    kind.add_argument("--openmetrics", action="store_true", help="the OpenMetrics drop-in in place of pmdaopenmetrics")


def _run(name: str, env: dict[str, str]) -> int:
    """Run the shipped script (stdin passed through: pmdaproc.sh may ask)."""
    try:
        return subprocess.call(["/bin/sh", script(name)], env={**os.environ, **env})
    except KeyboardInterrupt:
        return 130


def _project_conf(packages: Sequence[str]) -> tuple[str | None, dict[str, str]]:
    """The ``pmda.conf`` of the first project directory among ``packages``,
    and its ``[pmda]`` section."""
    for pkg in packages:
        conf = Path(pkg) / "pmda.conf"
        if conf.is_file():
            cp = configparser.ConfigParser(interpolation=None)
            try:
                cp.read(conf, encoding="utf-8")
            except configparser.Error:
                return str(conf.resolve()), {}
            return str(conf.resolve()), dict(cp["pmda"]) if cp.has_section("pmda") else {}
    return None, {}


def _pip_args_joined(argv: Sequence[str]) -> list[str]:
    """``argv`` with each ``--pip-arg VALUE`` as ``--pip-arg=VALUE``: a pip
    option is the value (``--pip-arg --no-index``), not one of ours."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--":
            out.append(arg)
            out.extend(args)
            break
        if arg == "--pip-arg":
            value = next(args, None)
            out.append(arg if value is None else f"--pip-arg={value}")
        else:
            out.append(arg)
    return out


def install_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(
        prog="pmda-py install",
        description="Install an agent into pmcd (PCP's pmdaproc.sh), with table packages pip installed "
        "into its virtualenv.  Needs root.",
    )
    _common(p)
    p.add_argument("-d", "--domain", help="domain number (PYPMDA_DOMAIN; default 310, or the project's)")
    p.add_argument("-t", "--transport", choices=["pipe", "inet", "ipv6", "unix"], help="PYPMDA_TRANSPORT")
    p.add_argument("-a", "--address", help="port or socket path (PYPMDA_ADDRESS)")
    p.add_argument("-c", "--config", help="config file to install (PYPMDA_CONFIG; default: the project's pmda.conf)")
    p.add_argument("--needinstall", action="store_true", help="prepare only; pmcd installs it at its next start")
    p.add_argument("--python", help="interpreter of the agent's virtualenv (PYTHON)")
    p.add_argument("--source", help="what pip installs as pmda_py (default: %(default)s)", default=default_source())
    p.add_argument(
        "--pip-arg", action="append", default=[], help="one extra pip option, e.g. --pip-arg --no-index (repeatable)"
    )
    p.add_argument("packages", nargs="*", metavar="PACKAGE", help="table packages: directories, wheels, requirements")
    ns = p.parse_args(_pip_args_joined(argv))
    packages = [str(Path(pkg).resolve()) if os.path.exists(pkg) else pkg for pkg in ns.packages]
    for pkg in [*packages, ns.source, *ns.pip_arg]:
        if not pkg or any(c.isspace() for c in pkg):
            p.error(f"{pkg!r}: names with spaces cannot be passed to pip here")
    conf, pmda = _project_conf(packages)
    env: dict[str, str] = {"PYPMDA_SOURCE": ns.source}
    if packages:
        env["PYPMDA_PACKAGES"] = " ".join(packages)
    if ns.pip_arg:
        env["PYPMDA_PIP_ARGS"] = " ".join(ns.pip_arg)
    config = ns.config or conf
    if config:
        env["PYPMDA_CONFIG"] = str(Path(config).resolve())
    name = ns.name or pmda.get("name")
    domain = ns.domain or pmda.get("domain")
    for key, value in (
        ("PYPMDA_NAME", name),
        ("PYPMDA_DOMAIN", domain),
        ("PYPMDA_TRANSPORT", ns.transport),
        ("PYPMDA_ADDRESS", ns.address),
        ("PYTHON", ns.python),
    ):
        if value:
            env[key] = value
    if ns.mmv:
        env["PYPMDA_MMV"] = "1"
    if ns.openmetrics:
        env["PYPMDA_OPENMETRICS"] = "1"
    if ns.needinstall:
        env["PYPMDA_NEEDINSTALL"] = "1"
    return _run("Install", env)


def remove_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="pmda-py remove", description="Remove an agent from pmcd.  Needs root.")
    _common(p)
    ns = p.parse_args(list(argv))
    env: dict[str, str] = {}
    if ns.name:
        env["PYPMDA_NAME"] = ns.name
    if ns.mmv:
        env["PYPMDA_MMV"] = "1"
    if ns.openmetrics:
        env["PYPMDA_OPENMETRICS"] = "1"
    return _run("Remove", env)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["install"]:
        return install_main(args[1:])
    if args[:1] == ["remove"]:
        return remove_main(args[1:])
    print("usage: python -m pmda_py.tools.pmdainstall install|remove ...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
