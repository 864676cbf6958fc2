"""The ``pmda-py`` command: ``run`` is the daemon, ``compat`` runs a
pcp.pmda PMDA script on it; ``install``, ``remove`` and ``new`` put agents
into pmcd and start projects; ``dbpmda``, ``pmns``, ``help`` and ``demo``
are tools.

Each subcommand lives in its own module and exposes ``main(argv) -> int``;
this module only dispatches, so importing it stays cheap.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]

_COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("pmda_py.runtime.main", "run the PMDA daemon (as pmcd starts it from pmcd.conf)"),
    "dbpmda": ("pmda_py.testing.dbpmda.cli", "drive a PMDA with dbpmda's command language"),
    "pmns": ("pmda_py.tools.installer", "write the PMNS fragment for the configured tables"),
    "help": ("pmda_py.tools.installer", "write the help text source for the configured tables"),
    "compat": ("pmda_py.compat.cli", "run a PMDA written for PCP's pcp.pmda (SCRIPT [ARGS...])"),
    "demo": ("pmda_py.tools.demo", "start the daemon with the built-in tables and drive it"),
    "pmlogconf": ("pmda_py.tools.installer", "write the agent's pmlogconf group (used by Install)"),
    "pmcdconf": ("pmda_py.tools.installer", "show or set an agent's pmcd.conf line (used by Install)"),
    "install": ("pmda_py.tools.pmdainstall", "install an agent into pmcd, table packages in its virtualenv"),
    "remove": ("pmda_py.tools.pmdainstall", "remove an agent from pmcd"),
    "new": ("pmda_py.tools.newproject", "write a ready project for a third-party agent"),
}


def _usage() -> str:
    lines = ["usage: pmda-py COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<10} {text}" for name, (_, text) in _COMMANDS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pmda-py`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 2
    name = args[0]
    if name not in _COMMANDS:
        print(f"pmda-py: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(_COMMANDS[name][0])
    entry = getattr(module, f"{name}_main", None) or module.main
    return int(entry(args[1:]))
