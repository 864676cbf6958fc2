"""What the project's own tests (and a table author's) share: the daemon's
command line, a directory other users can traverse, and a runner that runs
table calls in the test's own task (the dispatcher's
:class:`~pmda_py.dispatch.Runner` without deadlines).

Example::

    from pmda_py.testing.support import pmda_py_argv

    argv = pmda_py_argv("run", "-d", "253", "--table", "simple")
    # [sys.executable, "-m", "pmda_py", "run", "-d", "253", "--table", "simple"]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Awaitable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, TypeVar

from pmda_py.table import Table

__all__ = ["InlineRunner", "pmda_py_argv", "pmda_py_line", "traversable_dir"]

_T = TypeVar("_T")


def pmda_py_argv(*args: str) -> list[str]:
    """``pmda-py ARGS...`` as the interpreter running the caller runs it (no
    activated virtualenv or installed script needed)."""
    return [sys.executable, "-m", "pmda_py", *args]


def pmda_py_line(*args: object) -> str:
    """:func:`pmda_py_argv` as one line of words, for what splits a command on
    white space (a pmcd.conf line, dbpmda's ``open pipe``); ``args`` are turned
    into strings (paths welcome).

    Raises:
        ValueError: a word is empty or holds white space (it would not come
            back as one word).
    """
    argv = pmda_py_argv(*map(str, args))
    bad = [a for a in argv if not a or any(c.isspace() for c in a)]
    if bad:
        raise ValueError(f"words that would not split back as they are: {bad}")
    return " ".join(argv)


@contextmanager
def traversable_dir(prefix: str = "pmda_py-") -> Iterator[Path]:
    """A fresh temporary directory mode 0755 (a process that dropped to
    another user, such as pmdammv or ``-U pcp``, can reach what is in it),
    removed with its contents afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class InlineRunner:
    """Runs every table call at once in the caller's task: no deadlines,
    no threads, checks skipped."""

    async def call(self, table: Table, what: str, fn: Callable[[], Awaitable[_T]]) -> _T:
        return await fn()

    async def gather(self, calls: Sequence[tuple[Table, str, Callable[[], Awaitable[object]]]]) -> list[object]:
        out: list[object] = []
        for _table, _what, fn in calls:
            try:
                out.append(await fn())
            except Exception as exc:  # the Runner contract: the exception is the result
                out.append(exc)
        return out

    async def check(self, table: Table) -> None:
        return None
