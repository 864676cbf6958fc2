"""``pmda-py compat SCRIPT [ARGS...]``: run a pcp.pmda PMDA script.

Everything after SCRIPT is the script's own ``sys.argv[1:]`` (scripts parse
it themselves).  The script runs as ``__main__`` with its directory first
on ``sys.path``, as ``python3 SCRIPT`` would run it, but sees pmda_py's
shims of ``pcp.pmda``, ``pcp.pmapi``, ``cpmapi`` and ``cpmda``.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence

__all__ = ["main"]

USAGE = "usage: pmda-py compat SCRIPT [ARGS...]   (run a pcp.pmda PMDA script on pmda_py)"


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    script = args[0]
    if not os.path.isfile(script):
        why = "not a file" if os.path.exists(script) else "no such file"
        print(f"pmda-py compat: {script}: {why}", file=sys.stderr)
        return 2
    deadline = os.environ.get("PYPMDA_COMPAT_DEADLINE")
    if deadline and not _seconds_under_pmcds_timeout(deadline):
        print(
            f"pmda-py compat: PYPMDA_COMPAT_DEADLINE={deadline!r}: not seconds between 0 and 5 (pmcd's timeout)",
            file=sys.stderr,
        )
        return 2
    from pmda_py.compat.agent import AGENT
    from pmda_py.compat.finder import install

    AGENT.take_channel()
    install()
    sys.argv = [script, *args[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(os.path.abspath(script), run_name="__main__")  # __file__ absolute, as python3 makes it
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except Exception as exc:  # the script's own error: its traceback, as ``python3 SCRIPT`` prints it
        _print_script_error(exc, script)
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C: the script's traceback, and the end python3 makes of it
        _print_script_error(exc, script)
        _die_by_sigint()
        return 130
    return 0


def _die_by_sigint() -> None:
    """End as a process that SIGINT killed, as ``python3 SCRIPT`` ends after
    an uncaught KeyboardInterrupt (its parent sees the signal, not a status)."""
    import signal

    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)


def _print_script_error(exc: BaseException, script: str) -> None:
    """``exc``'s traceback from the script's first frame on (ours above it
    left out, as Python leaves out its own start-up); a syntax error has
    none of the script's frames: only the error, with its line.  An error
    raised where no frame is the script's is printed whole."""
    import traceback

    path = os.path.abspath(script)
    tb = exc.__traceback__
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != path:
        tb = tb.tb_next
    if tb is None and not isinstance(exc, SyntaxError):
        tb = exc.__traceback__
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)


def _seconds_under_pmcds_timeout(text: str) -> bool:
    try:
        value = float(text)
    except ValueError:
        return False
    return 0 < value < 5  # (False for nan)
