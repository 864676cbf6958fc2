"""``python -m pmda_py.compat.install PYTHON LINE``: the pmcd.conf line that
runs an installed pcp.pmda agent with ``pmda-py compat`` (used by
``PYPMDA_COMPAT=NAME ./Install``).

``LINE`` is the agent's line as pmcd.conf has it, e.g. ``zswap 125 pipe
binary python3 /var/lib/pcp/pmdas/zswap/pmdazswap.python``; the result keeps
its name, domain, ``pipe binary`` and ``notready`` flag, script and
arguments, and replaces the interpreter (``python3``, ``/usr/bin/python3``,
``pmpython``...) with ``PYTHON -m pmda_py compat``.  Only pipe agents run
by a Python interpreter qualify: anything else is refused with one line on
stderr (exit status 1).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence

__all__ = ["compat_line", "main"]

_INTERPRETER = re.compile(r"^(python[0-9.]*|pmpython)$")


def compat_line(python: str, line: str) -> str:
    """The pmcd.conf line for ``pmda-py compat``; ValueError if ``line`` is
    not a pipe agent started by a Python interpreter."""
    fields = line.split()
    if len(fields) < 6 or fields[2] != "pipe":
        raise ValueError(f"not a pipe agent line: {line!r}")
    head = fields[:4]
    rest = fields[4:]
    if rest[0] == "notready":
        head.append(rest.pop(0))
    if not rest or not _INTERPRETER.match(os.path.basename(rest[0])) or len(rest) < 2:
        raise ValueError(f"the agent is not run by a Python interpreter: {' '.join(rest)!r}")
    return "\t".join(head) + "\t" + " ".join([python, "-m", "pmda_py", "compat", *rest[1:]])


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m pmda_py.compat.install PYTHON LINE", file=sys.stderr)
        return 2
    try:
        print(compat_line(args[0], args[1]))
    except ValueError as err:
        print(f"pmda_py.compat.install: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
