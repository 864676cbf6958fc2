"""The command line of ``pmda-py dbpmda``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator, Sequence
from typing import IO

import trio

from pmda_py.namespace import Namespace, PmnsError, load
from pmda_py.testing.dbpmda.session import DbpmdaSession, load_failure, run_script

__all__ = ["main"]

DESCRIPTION = """\
Drive a PMDA with PCP dbpmda's command language and print what dbpmda prints.

Reads commands from stdin (a line at a time, each run as it is read; a
prompt before each line when stdin is a terminal, or with -i) or a file:
open pipe|socket, close, desc, fetch, instance, text, profile, store,
children, traverse, pmid, name, label, attr, getdesc, getiname, timer,
wait, namespace, debug, status, help, quit.
Unless -f, the commands in ./.dbpmdarc run first (echoed, after a
".dbpmdarc> " prompt), as dbpmda runs them.
Names resolve through a PMNS file (-n, default $PCP_VAR_DIR/pmns/root); names
below a dynamic subtree are asked of the PMDA, as dbpmda does.  Normal output
goes to stdout, warnings and errors to stderr, as dbpmda's do.
"""


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return f.read()


def _read_lines(f: IO[str]) -> Iterator[str]:
    """The lines of ``f`` as they come, what was printed shown first (a
    person at dbpmda's prompt sees each answer before typing on)."""
    while True:
        sys.stdout.flush()
        line = f.readline()
        if not line:
            return
        yield line


def _dbpmdarc() -> list[str] | None:
    """The lines of ``.dbpmdarc`` in the current directory, None if there is
    none to open (dbpmda reads a directory there as an empty file)."""
    try:
        return _read(".dbpmdarc").splitlines(keepends=True)
    except IsADirectoryError:
        return []
    except OSError:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``pmda-py dbpmda``."""
    p = argparse.ArgumentParser(
        prog="pmda-py dbpmda", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("-n", "--namespace", dest="pmns", help="PMNS file (default $PCP_VAR_DIR/pmns/root)")
    p.add_argument("-e", "--echo-input", dest="echo", action="store_true", help="echo input commands")
    p.add_argument("-i", "--interactive", dest="interactive", action="store_true", help="interactive (prompt)")
    p.add_argument("-f", "--norc", dest="norc", action="store_true", help="do not run ./.dbpmdarc before the commands")
    p.add_argument(
        "-q", "--creds-timeout", metavar="N", help="seconds to wait for a PMDA's CREDS when it is opened (default 3)"
    )
    p.add_argument("-U", "--username", metavar="USER", help="run as USER (and so every PMDA it starts); root only")
    p.add_argument("script", nargs="?", help="command file (default stdin)")
    ns = p.parse_args(list(argv or []))
    creds_timeout = 3
    if ns.creds_timeout is not None:
        try:
            creds_timeout = int(ns.creds_timeout, 10)
        except ValueError:
            creds_timeout = 0
        if creds_timeout <= 0:
            print("pmda-py dbpmda: -q requires a positive numeric argument", file=sys.stderr)
            return 1
    if ns.username:  # as dbpmda does: at once, before the PMNS or any command
        from pmda_py.runtime.privileges import drop_privileges

        try:
            drop_privileges(ns.username)
        except (KeyError, OSError) as err:
            why = "no such user" if isinstance(err, KeyError) else str(err)
            print(f"pmda-py dbpmda: cannot run as {ns.username}: {why}", file=sys.stderr)
            return 1
    pmns: Namespace | None = None
    path = ns.pmns or os.path.join(os.environ.get("PCP_VAR_DIR", "/var/lib/pcp"), "pmns", "root")
    if ns.pmns or os.path.exists(path):
        try:
            pmns = load(path)
        except PmnsError as err:
            if not os.path.exists(path):  # a mistyped name: one line
                print(f"pmda-py dbpmda: cannot load namespace: {err}", file=sys.stderr)
            else:  # a malformed file: what dbpmda prints, libpcp's lines (the line, a caret) and its own
                sys.stderr.write(load_failure(path, err, True))
            return 1
    lines: Iterator[str]
    if ns.script:
        try:
            lines = iter(_read(ns.script).splitlines(keepends=True))
        except OSError as err:
            print(f"pmda-py dbpmda: cannot read {ns.script}: {err.strerror or err}", file=sys.stderr)
            return 1
        interactive = ns.interactive
    else:
        lines = _read_lines(sys.stdin)
        interactive = ns.interactive or sys.stdin.isatty()  # dbpmda prompts on a terminal
    rc = None if ns.norc else _dbpmdarc()
    session = DbpmdaSession(sys.stdout, sys.stderr, pmns, echo=ns.echo)
    session.interactive = interactive
    session.pmns_name = ns.pmns
    session.link.creds_timeout = creds_timeout
    return trio.run(run_script, lines, session, rc)
