"""A dbpmda session: the statements gram.y accepts, run against a PMDA.

:class:`DbpmdaSession` reads a script through the scanner and parser, and
runs each statement with the handler ``COMMANDS`` names for its kind (the
``switch (stmt_type)`` of dbpmda.c's main loop and pmda.c's ``dopmda``).
Errors are dbpmda's: a caret under the input line and a message; the
session goes on with the next line.  Three layers: this module interprets
the statements; :mod:`~pmda_py.testing.dbpmda.link` and
:mod:`~pmda_py.testing.dbpmda.requests` exchange the PDUs;
:mod:`~pmda_py.testing.dbpmda.transcript` writes what dbpmda prints.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import IO

import trio

from pmda_py.errors import PmErr, errstr
from pmda_py.namespace import Namespace, PmnsError, load
from pmda_py.pcpversion import pcp_version
from pmda_py.pmapi import DYNAMIC_PMID, PM_INDOM_NULL, pmid_domain, pmid_item
from pmda_py.testing.dbpmda.format import ATTR_KEYS, ATTR_NAMES, DEBUG_BITS, DEBUG_FLAGS, HELP, HELP_ORDER, pmid_str
from pmda_py.testing.dbpmda.lexer import Lexer
from pmda_py.testing.dbpmda.link import Connector, PmdaLink
from pmda_py.testing.dbpmda.parser import ParseError, Parser, Stmt
from pmda_py.testing.dbpmda.requests import PmdaRequests, Settings, parse_store_value
from pmda_py.testing.dbpmda.transcript import Transcript
from pmda_py.wire import ErrorPdu, PmnsIdsPdu, PmnsNamesPdu

__all__ = ["COMMANDS", "DbpmdaSession", "parse_store_value", "run_script"]


class _Feed:
    """The input lines: an iterator that may be given more after it ran dry."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        #: lines read one at a time when ``lines`` ran dry (a script read as
        #: it runs, as dbpmda reads its input: a person at the prompt)
        self.more: Iterator[str] | None = None
        #: called once when the lines run dry; what it returns is read next
        #: (dbpmda going on from .dbpmdarc to its input, in one stream)
        self.then: Callable[[], Iterable[str]] | None = None
        #: lines read so far
        self.count = 0

    def __iter__(self) -> _Feed:
        return self

    def __next__(self) -> str:
        if not self.lines and self.more is not None:
            line = next(self.more, None)
            if line is None:
                self.more = None
            else:
                self.lines.append(line)
        if not self.lines and self.then is not None:
            then, self.then = self.then, None
            self.more = iter(then())
            return next(self)
        if not self.lines:
            raise StopIteration
        self.count += 1
        return self.lines.pop(0)


Handler = Callable[["DbpmdaSession", Stmt], Awaitable[None]]


class DbpmdaSession:
    """One dbpmda session writing its transcript to ``out``/``err``."""

    def __init__(self, out: IO[str], err: IO[str], pmns: Namespace | None, echo: bool = False) -> None:
        self.transcript = Transcript(out, err, echo)
        self.link = PmdaLink(self.transcript)
        self.settings = Settings(pmns)
        self.requests = PmdaRequests(self.link, self.transcript, self.settings)
        self.timer = False
        self.done = False
        #: what ``status`` shows as the namespace
        self.pmns_name: str | None = None
        #: the PMNS the session started with, and its name (-n; None: the
        #: default): what a failed ``namespace`` goes back to, as dbpmda does
        self._first_pmns: tuple[Namespace | None, str | None] | None = None
        self.debug: set[str] = set()
        #: the scanner's state lasts from one statement to the next (flex's
        #: buffer, its start condition)
        self._feed: list[str] = []
        self._source = _Feed(self._feed)
        self.lexer = Lexer(self._source, echo=self.transcript.echo_char, on_newline=self.transcript.prompt)
        self.parser = Parser(self.lexer, self, self.error)

    @property
    def connector(self) -> Connector | None:
        """Replaces starting or connecting a PMDA (see :data:`~pmda_py.testing.dbpmda.link.Connector`)."""
        return self.link.connector

    @connector.setter
    def connector(self, connector: Connector | None) -> None:
        self.link.connector = connector

    @property
    def interactive(self) -> bool:
        """A prompt before each input line."""
        return self.transcript.interactive

    @interactive.setter
    def interactive(self, on: bool) -> None:
        self.transcript.interactive = on

    def warn(self, msg: str) -> None:
        """yywarn."""
        self.transcript.warn(msg)

    def error(self, msg: str) -> None:
        """yyerror: read to the end of the line, a caret under where the
        scanner had got to (dbpmda's ``locateError``), the message on stderr."""
        mark = self.lexer.linepos
        self.lexer.skip_line()
        pad = "".join("\t" if c == "\t" else " " for c in self.lexer.line[:mark].split("\n", 1)[0])
        self.transcript.caret(pad, msg)

    # -- running
    async def execute(self, line: str) -> str:
        """Run the statements of one line (echoed if ``echo``); returns what
        they printed on ``out`` (written there too)."""
        self.transcript.start_capture()
        try:
            self._feed.append(line if line.endswith("\n") else line + "\n")
            await self.run()
        finally:
            captured = self.transcript.stop_capture()
        return captured

    async def run_lines(self, lines: Iterable[str]) -> None:
        """Run a whole script, each statement as soon as its line is read
        (``lines`` may be a file being typed into)."""
        self._source.more = iter(lines)
        await self.run()

    async def run(self) -> None:
        """Parse and run statements until the input given so far is used up
        (or ``quit``)."""
        while not self.done:
            stmt = await self.parser.statement()
            if stmt.kind == "EOF":
                self.lexer.lastc = "\n"  # more input may come (execute)
                return
            t0 = time.monotonic()
            self.requests.failed = False
            await COMMANDS[stmt.kind](self, stmt)
            # dbpmda times only the requests that were answered without error
            if self.timer and stmt.kind in _TIMED and self.link.client is not None and not self.requests.failed:
                self.transcript.p(f"Timer: {time.monotonic() - t0:f} seconds")
            self.transcript.flush()

    async def close(self) -> None:
        """Close the PMDA, if one is open."""
        await self.link.close()

    # -- the grammar's actions (parser.Semantics)
    async def metric_by_name(self, name: str) -> int:
        pmns = self.settings.pmns
        if pmns is None:
            raise ParseError(errstr(PmErr.NOPMNS))
        try:
            p = pmns.lookup(name)
        except KeyError:
            node = pmns.node(name)
            nonleaf = node is not None and not node.is_leaf
            raise ParseError(errstr(PmErr.NONLEAF if nonleaf else PmErr.NAME)) from None
        if pmid_domain(p) == DYNAMIC_PMID and pmid_item(p) == 0 and self.link.client is not None:
            reply = await self.link.request(PmnsNamesPdu((name,)))
            if isinstance(reply, PmnsIdsPdu) and reply.pmids:
                return reply.pmids[0]
            code = reply.code if isinstance(reply, ErrorPdu) else PmErr.IPC
            raise ParseError(errstr(code))
        return p

    def metric_by_number(self, pmid: int) -> int:
        pmns = self.settings.pmns
        if pmns is None or not pmns.names(pmid):
            self.warn(f"PMID ({pmid_str(pmid)}) is not defined in the PMNS")
        return pmid

    def profile_change(self, indom: int, add: bool, insts: list[int]) -> None:
        """pmAddProfile / pmDelProfile."""
        if indom == PM_INDOM_NULL and insts:
            raise ParseError(errstr(PmErr.PROFILESPEC))
        if add:
            self.link.profile.add(indom, insts)
        else:
            self.link.profile.delete(indom, insts)
        self.link.profile_changed = True

    def debug_flag(self, flag: str) -> bool:
        """pmSetDebug / pmClearDebug of one option (name, -name or number)."""
        if flag.lstrip("-").isdigit() or (flag.startswith("-") and flag[1:].isdigit()):
            if pcp_version() >= (7, 0, 0):  # 7.x's pmSetDebug takes no numeric flags
                return False
            value = int(flag)
            if value < 0:
                return False
            if value < 1 << 31:
                self.debug |= {f for b, f in DEBUG_BITS.items() if value >> b & 1}
            return True
        clear, name = (True, flag[1:]) if flag.startswith("-") else (False, flag)
        if name not in DEBUG_FLAGS:
            return False
        if clear:
            self.debug.discard(name)
        else:
            self.debug.add(name)
        return True

    def debug_all(self, on: bool) -> None:
        self.debug = set(DEBUG_FLAGS) if on else set()

    def attribute_code(self, key: int | str) -> int:
        if isinstance(key, int):
            if key not in ATTR_NAMES:
                raise ParseError(f"Attribute ({key}) is not recognised")
            return key
        code = ATTR_KEYS.get(key, 0)
        if not code:
            raise ParseError(f"Attribute ({key}) is not recognised")
        return code

    def service_port(self, name: str) -> int:
        try:
            port = socket.getservbyname(name)
        except OSError:
            raise ParseError(f"Failed to map ({name}) to a port number") from None
        port = ((port & 0xFF) << 8) | (port >> 8)  # s_port is in network byte order
        self.warn(f"Mapped {name} to port number {port}")
        return port

    # -- the statements dbpmda answers itself
    async def _do_nothing(self, stmt: Stmt) -> None:
        return

    async def _do_quit(self, stmt: Stmt) -> None:
        self.done = True

    async def _do_close(self, stmt: Stmt) -> None:
        if self.link.client is None:
            self.warn("No PMDA currently opened")
        await self.close()

    async def _do_status(self, stmt: Stmt) -> None:
        link = self.link
        self.transcript.status(
            self.pmns_name,
            None if link.client is None or link.name is None else (link.name, link.pid, link.version),
            self.debug,
            (("Timer", self.timer), ("Getdesc", self.settings.getdesc), ("Getiname", self.settings.getiname)),
            link.profile.state,
            link.profile.rows(),
        )

    async def _do_timer(self, stmt: Stmt) -> None:
        self.timer = stmt.flag

    async def _do_getdesc(self, stmt: Stmt) -> None:
        self.settings.getdesc = stmt.flag

    async def _do_getiname(self, stmt: Stmt) -> None:
        self.settings.getiname = stmt.flag

    async def _do_wait(self, stmt: Stmt) -> None:
        await trio.sleep(stmt.seconds)

    async def _do_help(self, stmt: Stmt) -> None:
        """util.c ``dohelp``."""
        p = self.transcript.p
        if stmt.help_of is None:
            p("help [ command ]\n")
            for name in HELP_ORDER:
                p(HELP[name][0])
            p()
            return
        usage, text = HELP[stmt.help_of]
        if not stmt.full:
            p(usage)
            return
        p()
        p(usage)
        p()
        if text:
            p(text)

    async def _do_namespace(self, stmt: Stmt) -> None:
        """dbpmda.c NAMESPACE: load another PMNS, else reload the one the
        session started with (-n, or the default)."""
        path = str(stmt.name)
        if self._first_pmns is None:
            self._first_pmns = (self.settings.pmns, self.pmns_name)
        first, previous = self._first_pmns
        self.pmns_name = path  # dbpmda shows the new name even when loading fails
        try:
            new = await trio.to_thread.run_sync(load, path)
        except PmnsError as err:
            lines = load_failure(path, err, await trio.Path(path).exists())
            lines += (
                f'dbpmda: Reload namespace from "{previous}"\n' if previous else "dbpmda: Reload default namespace\n"
            )
            self.transcript.complain(lines)
            self.settings.pmns = first
            return
        self.settings.pmns = new

    async def _do_open(self, stmt: Stmt) -> None:
        """pmda.c ``openpmda`` / ``open_unix_socket`` / ``open_inet_socket``."""
        self.link.profile_changed = True  # dbpmda.c: on every "open", whether it works or not
        if stmt.open_kind == "dso":
            await self.link.open_dso(str(stmt.name))
        elif stmt.open_kind == "pipe":
            await self.link.open_pipe(str(stmt.name), stmt.args)
        else:
            await self.link.open_socket(stmt.open_kind, str(stmt.name), stmt.port)

    async def _do_watch(self, stmt: Stmt) -> None:
        """util.c ``watch``: ``system("xterm ... -e tail -f FILE &")``.  The
        xterm is started without a shell; without one, the message sh gives."""
        fname = str(stmt.name)
        xterm = shutil.which("xterm")
        if xterm is None:
            self.transcript.complain("sh: 1: xterm: not found\n")
            return
        argv = [
            xterm,
            "-hold",
            "-title",
            f"dbpmda watch {fname}",
            "-geom",
            "80x16",
            "-bg",
            "dodgerblue4",
            "-e",
            "tail",
            "-f",
            fname,
        ]
        await trio.lowlevel.open_process(argv, stdin=subprocess.DEVNULL, start_new_session=True)


def _asks(request: Callable[[PmdaRequests, Stmt], Awaitable[None]]) -> Handler:
    """The handler of a statement the PMDA answers: a warning when none is open."""

    async def handler(session: DbpmdaSession, stmt: Stmt) -> None:
        if session.link.client is None:
            session.warn("No PMDA currently opened")
            return
        await request(session.requests, stmt)

    return handler


# statements the timer reports on (pmda.c dopmda)
_TIMED = frozenset(
    (
        "DESC",
        "FETCH",
        "INSTANCE",
        "STORE",
        "INFO",
        "LABEL",
        "PMNS_PMID",
        "PMNS_NAME",
        "PMNS_CHILDREN",
        "PMNS_TRAVERSE",
        "ATTR",
    )
)

#: dbpmda.c's ``switch (stmt_type)``: the handler of each kind of statement
COMMANDS: dict[str, Handler] = {
    "EOL": DbpmdaSession._do_nothing,
    "DBG": DbpmdaSession._do_nothing,  # the parser's actions set the flags
    "WATCH": DbpmdaSession._do_watch,
    "QUIT": DbpmdaSession._do_quit,
    "CLOSE": DbpmdaSession._do_close,
    "STATUS": DbpmdaSession._do_status,
    "HELP": DbpmdaSession._do_help,
    "TIMER": DbpmdaSession._do_timer,
    "GETDESC": DbpmdaSession._do_getdesc,
    "GETINAME": DbpmdaSession._do_getiname,
    "WAIT": DbpmdaSession._do_wait,
    "NAMESPACE": DbpmdaSession._do_namespace,
    "OPEN": DbpmdaSession._do_open,
    "DESC": _asks(PmdaRequests.desc),
    "FETCH": _asks(PmdaRequests.fetch),
    "INSTANCE": _asks(PmdaRequests.instance),
    "INFO": _asks(PmdaRequests.text),
    "STORE": _asks(PmdaRequests.store),
    "LABEL": _asks(PmdaRequests.label),
    "PMNS_PMID": _asks(PmdaRequests.pmid),
    "PMNS_NAME": _asks(PmdaRequests.name),
    "PMNS_CHILDREN": _asks(PmdaRequests.children),
    "PMNS_TRAVERSE": _asks(PmdaRequests.traverse),
    "ATTR": _asks(PmdaRequests.attr),
}


async def run_script(lines: Iterable[str], session: DbpmdaSession, rc: Sequence[str] | None = None) -> int:
    """Run a script to its end (or ``quit``), then close the PMDA.

    ``lines`` is read as the script runs, one line at a time: each
    statement runs (and its output is flushed) before the next line is read.

    ``rc`` is the lines of a ``.dbpmdarc``, read first as dbpmda reads it:
    echoed, each line after a ``.dbpmdarc> `` prompt, errors naming its
    line; the script's input follows in the same stream.  At the end of the
    script, an interactive session ends its last prompt's line, as dbpmda does.
    """
    transcript = session.transcript
    try:
        if rc is None:
            await session.run_lines(lines)
        else:
            saved = transcript.echo, transcript.interactive

            def to_input() -> Iterable[str]:
                (transcript.echo, transcript.interactive), transcript.prompt_text = saved, "dbpmda> "
                transcript.rc_line = None
                transcript.prompt()
                return lines

            source = session._source
            start = source.count
            transcript.echo, transcript.interactive, transcript.prompt_text = True, True, ".dbpmdarc> "
            transcript.rc_line = lambda: source.count - start
            source.then = to_input
            await session.run_lines(rc)
        if transcript.interactive and not session.done:
            transcript.p("")
    finally:
        await session.close()
        session.transcript.flush()
    return 0


def load_failure(path: str, err: PmnsError, exists: bool) -> str:
    """What dbpmda prints when the PMNS file ``path`` does not load: libpcp's
    (and pmcpp's) error lines, then its own."""
    if not exists:
        return (
            f'Error Parsing ASCII PMNS: Cannot open "{path}"\n'
            f'dbpmda: Cannot load namespace from "{path}": {os.strerror(2)}\n'
        )
    lines = err.printed
    if lines is None:
        where = f"[{err.file}:{err.line}] " if err.line > 0 else ""
        lines = f"{where}Error Parsing ASCII PMNS: {err.reason}\n"
    return lines + f'dbpmda: Cannot load namespace from "{path}": {errstr(PmErr.PMNS)}\n'
