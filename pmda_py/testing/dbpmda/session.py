"""A dbpmda session: the statements gram.y accepts, run against a PMDA.

:class:`DbpmdaSession` reads a script through the scanner and parser, and
runs each statement with the handler ``COMMANDS`` names for its kind (the
``switch (stmt_type)`` of dbpmda.c's main loop and pmda.c's ``dopmda``).
Errors are dbpmda's: a caret under the input line and a message; the
session goes on with the next line.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import IO, Any

import trio

from pmda_py.errors import PmErr, WireFormatError, errstr
from pmda_py.namespace import Namespace, PmnsError, load
from pmda_py.pcpversion import pcp_version
from pmda_py.pmapi import (
    DYNAMIC_PMID,
    PM_IN_NULL,
    PM_INDOM_NULL,
    PmDesc,
    PmType,
    TextType,
    indom_str,
    pmid_cluster,
    pmid_domain,
    pmid_item,
)
from pmda_py.testing.client import PmdaClient, connect_socket_pmda, process_stream
from pmda_py.testing.dbpmda.cvalues import c_strtod, c_strtol, c_strtoul, to_int, to_uint
from pmda_py.testing.dbpmda.format import (
    ATTR_KEYS,
    ATTR_NAMES,
    DEBUG_BITS,
    DEBUG_FLAGS,
    HELP,
    HELP_ORDER,
    TYPE_STR,
    desc_lines,
    pmid_str,
    print_value,
    time_of,
)
from pmda_py.testing.dbpmda.lexer import Lexer
from pmda_py.testing.dbpmda.parser import ParseError, Parser, Stmt
from pmda_py.wire import (
    AttrPdu,
    CredsPdu,
    DescPdu,
    DescReqPdu,
    ErrorPdu,
    FetchPdu,
    InstancePdu,
    InstanceReqPdu,
    LabelPdu,
    LabelReqPdu,
    Pdu,
    PmnsChildPdu,
    PmnsIdsPdu,
    PmnsNamesPdu,
    PmnsTraversePdu,
    PmValue,
    ProfileEntry,
    ProfilePdu,
    ResultPdu,
    TextPdu,
    TextReqPdu,
    ValFmt,
    ValueBlock,
    ValueSet,
)

__all__ = ["COMMANDS", "DbpmdaSession", "parse_store_value", "run_script"]


class _Profile:
    """libpcp's client profile (``pmAddProfile`` / ``pmDelProfile``), quirk
    included: a new per-indom entry starts EXCLUDE, for add and delete alike."""

    def __init__(self) -> None:
        self.entries: dict[int, list[Any]] = {}  # indom -> [state, [insts]], in creation order

    def _entry(self, ind: int) -> list[Any]:
        return self.entries.setdefault(ind, [1, []])

    def add(self, ind: int, insts: Sequence[int]) -> None:
        self._change(ind, insts, 0)  # no instances: INCLUDE all

    def delete(self, ind: int, insts: Sequence[int]) -> None:
        self._change(ind, insts, 1)  # no instances: EXCLUDE all

    state = 0  # the context's global state: INCLUDE, or EXCLUDE after pmDelProfile(PM_INDOM_NULL, 0, NULL)

    def _change(self, ind: int, insts: Sequence[int], state: int) -> None:
        """Move ``insts`` towards ``state`` (0 INCLUDE, 1 EXCLUDE); the
        entry's list holds the exceptions to its own state."""
        if ind == PM_INDOM_NULL and not insts:  # every indom: the global state, no entries
            self.state, self.entries = state, {}
            return
        e = self._entry(ind)
        if not insts:
            e[0], e[1] = state, []
        elif e[0] == state:
            e[1] = [i for i in e[1] if i not in insts]
        else:
            e[1] += [i for i in insts if i not in e[1]]

    def pdu(self) -> ProfilePdu:
        return ProfilePdu(0, self.state, tuple(ProfileEntry(i, s, tuple(lst)) for i, (s, lst) in self.entries.items()))


def parse_store_value(text: str, type_: int) -> int | float | str:
    """pmda.c ``fillValues``: the value of ``store`` for a metric of type
    ``type_`` (the casts included), or the line dbpmda prints instead."""
    tname = TYPE_STR.get(type_, str(type_))
    value: int | float | str
    if type_ in (PmType.I32, PmType.I64):
        value, used, erange = c_strtol(text)
        if type_ == PmType.I32:
            value = to_int(value)
    elif type_ in (PmType.U32, PmType.U64):
        value, used, erange = c_strtoul(text)
        if type_ == PmType.U32:
            value = to_uint(value)
    elif type_ in (PmType.FLOAT, PmType.DOUBLE):
        value, used, erange = c_strtod(text, single=type_ == PmType.FLOAT)
    elif type_ == PmType.STRING:
        return text
    else:
        return f"Error: dbpmda does not support storing into {tname} metrics"
    if erange:
        return f"Error: Decoding value: {os.strerror(34)}"
    if used != len(text):
        return f'Error: Value "{text}" is incompatible with metric type (PM_TYPE_{tname})'
    return value


def _strerror(err: BaseException) -> str:
    """strerror() of the errno under ``err`` (trio wraps failed attempts)."""
    seen: list[BaseException] = [err]
    while seen:
        e = seen.pop(0)
        if isinstance(e, OSError) and e.errno:
            return os.strerror(e.errno)
        seen += [x for x in (e.__cause__, e.__context__) if x is not None]
        seen += list(getattr(e, "exceptions", ()))
    return str(err)


class _Feed:
    """The input lines: an iterator that may be given more after it ran dry."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def __iter__(self) -> _Feed:
        return self

    def __next__(self) -> str:
        if not self.lines:
            raise StopIteration
        return self.lines.pop(0)


Handler = Callable[["DbpmdaSession", Stmt], Awaitable[None]]


class DbpmdaSession:
    """One dbpmda session writing its transcript to ``out``/``err``."""

    def __init__(self, out: IO[str], err: IO[str], pmns: Namespace | None, echo: bool = False) -> None:
        self.out, self.err, self.pmns, self.echo = out, err, pmns, echo
        self.client: PmdaClient | None = None
        self.process: trio.Process | None = None
        self.profile = _Profile()
        self.profile_changed = True
        self.getdesc = False
        self.getiname = False
        self.timer = False
        self.done = False
        self.interactive = False
        #: what ``status`` shows: the PMNS file, the PMDA, its pid, its PDU version
        self.pmns_name: str | None = None
        self.pmda_name: str | None = None
        self.pid = 0
        self.pmda_version: int | None = None
        self.debug: set[str] = set()
        self._captured: list[str] | None = None
        #: the scanner's state lasts from one statement to the next (flex's
        #: buffer, its start condition)
        self._feed: list[str] = []
        self.lexer = Lexer(self._lines(), echo=self._echo, on_newline=self._prompt)
        self.parser = Parser(self.lexer, self, self.error)
        #: optional replacement for starting/connecting a PMDA: called with
        #: ("pipe", argv) or ("unix"|"inet"|"ipv6", address) and returns a stream
        self.connector: Any = None

    # -- input
    def _lines(self) -> Iterator[str]:
        return _Feed(self._feed)

    def _echo(self, c: str) -> None:
        if self.echo:
            self.out.write(c)
            if self._captured is not None:
                self._captured.append(c)

    def _prompt(self) -> None:
        if self.interactive:
            self.out.write("dbpmda> ")

    # -- output
    def p(self, text: str = "") -> None:
        self.out.write(text + "\n")
        if self._captured is not None:
            self._captured.append(text + "\n")

    def warn(self, msg: str) -> None:
        """yywarn."""
        self.out.flush()
        self.err.write(f"Warning: {msg}\n")
        self.err.flush()

    def error(self, msg: str) -> None:
        """yyerror: read to the end of the line, a caret under where the
        scanner had got to (dbpmda's ``locateError``), the message on stderr."""
        mark = self.lexer.linepos
        self.lexer.skip_line()
        pad = "".join("\t" if c == "\t" else " " for c in self.lexer.line[:mark].split("\n", 1)[0])
        self.p(" " * 7 + pad + "^ at or near here")
        self.out.flush()
        self.err.write(f"Error: {msg}\nType 'help' for a list of commands.\n")
        self.err.flush()

    # -- running
    async def execute(self, line: str) -> str:
        """Run the statements of one line (echoed if ``echo``); returns what
        they printed on ``out`` (written there too)."""
        self._captured = []
        try:
            self._feed.append(line if line.endswith("\n") else line + "\n")
            await self.run()
        finally:
            captured, self._captured = self._captured, None
        return "".join(captured)

    async def run_lines(self, lines: Iterable[str]) -> None:
        """Run a whole script."""
        self._feed.extend(lines)
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
            await COMMANDS[stmt.kind](self, stmt)
            if self.timer and stmt.kind in _TIMED and self.client is not None:
                self.p(f"Timer: {time.monotonic() - t0:f} seconds")
            self.out.flush()

    # -- the grammar's actions (parser.Semantics)
    async def metric_by_name(self, name: str) -> int:
        if self.pmns is None:
            raise ParseError(errstr(PmErr.NOPMNS))
        try:
            p = self.pmns.lookup(name)
        except KeyError:
            node = self.pmns.node(name)
            nonleaf = node is not None and not node.is_leaf
            raise ParseError(errstr(PmErr.NONLEAF if nonleaf else PmErr.NAME)) from None
        if pmid_domain(p) == DYNAMIC_PMID and pmid_item(p) == 0 and self.client is not None:
            reply = await self._req(PmnsNamesPdu((name,)))
            if isinstance(reply, PmnsIdsPdu) and reply.pmids:
                return reply.pmids[0]
            code = reply.code if isinstance(reply, ErrorPdu) else PmErr.IPC
            raise ParseError(errstr(code))
        return p

    def metric_by_number(self, pmid: int) -> int:
        if self.pmns is None or not self.pmns.names(pmid):
            self.warn(f"PMID ({pmid_str(pmid)}) is not defined in the PMNS")
        return pmid

    def profile_change(self, indom: int, add: bool, insts: list[int]) -> None:
        """pmAddProfile / pmDelProfile."""
        if indom == PM_INDOM_NULL and insts:
            raise ParseError(errstr(PmErr.PROFILESPEC))
        if add:
            self.profile.add(indom, insts)
        else:
            self.profile.delete(indom, insts)
        self.profile_changed = True

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

    # -- the statements
    def _no_pmda(self) -> bool:
        if self.client is None:
            self.warn("No PMDA currently opened")
            return True
        return False

    async def _do_nothing(self, stmt: Stmt) -> None:
        return

    async def _do_quit(self, stmt: Stmt) -> None:
        self.done = True

    async def _do_close(self, stmt: Stmt) -> None:
        if self.client is None:
            self.warn("No PMDA currently opened")
        await self.close()

    async def _do_status(self, stmt: Stmt) -> None:
        self._status()

    async def _do_timer(self, stmt: Stmt) -> None:
        self.timer = stmt.flag

    async def _do_getdesc(self, stmt: Stmt) -> None:
        self.getdesc = stmt.flag

    async def _do_getiname(self, stmt: Stmt) -> None:
        self.getiname = stmt.flag

    async def _do_wait(self, stmt: Stmt) -> None:
        await trio.sleep(stmt.seconds)

    async def _do_help(self, stmt: Stmt) -> None:
        """util.c ``dohelp``."""
        if stmt.help_of is None:
            self.p("help [ command ]\n")
            for name in HELP_ORDER:
                self.p(HELP[name][0])
            self.p()
            return
        usage, text = HELP[stmt.help_of]
        if not stmt.full:
            self.p(usage)
            return
        self.p()
        self.p(usage)
        self.p()
        if text:
            self.p(text)

    async def _req(self, pdu: Pdu) -> Pdu | None:
        assert self.client is not None
        try:
            await self.client.send(pdu)
            return await self.client.receive(timeout=None)
        except EOFError:
            return None
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return None

    def _reply_error(self, reply: Pdu | None, what: str = "__pmGetPDU") -> bool:
        """Print dbpmda's message for a reply that is not the expected one."""
        text = self._reply_error_text(reply, what)
        if text is None:
            return False
        self.p(text)
        return True

    @staticmethod
    def _reply_error_text(reply: Pdu | None, what: str = "__pmGetPDU") -> str | None:
        """dbpmda's message for a reply that is not the expected one, or None."""
        if reply is None:
            return f"Error: {what}() failed: PDU empty, PMDA may have died"
        if isinstance(reply, ErrorPdu):
            return f"Error PDU: {errstr(reply.code)}"
        return None

    def _status(self) -> None:
        """util.c ``dostatus``."""
        self.p()
        self.p(f"Namespace:              {self.pmns_name or '(default)'}")
        if self.client is None or self.pmda_name is None:
            self.p("PMDA:                   none")
        else:
            self.p(f"PMDA:                   {self.pmda_name}")
            self.p(f"Connection:             daemon (pid: {self.pid})")
            version = "unknown!" if self.pmda_version is None else str(self.pmda_version)
            self.p(f"PMDA PMAPI Version:     {version}")
        if len(self.debug) == len(DEBUG_FLAGS):
            flags = "(all)"
        else:
            flags = " ".join(f for f in DEBUG_FLAGS if f in self.debug) or "(none)"
        self.p(f"Debug options:          {flags}")
        self.p(f"Timer:                  {'on' if self.timer else 'off'}")
        self.p(f"Getdesc:                {'on' if self.getdesc else 'off'}")
        self.p(f"Getiname:               {'on' if self.getiname else 'off'}")
        self.p()
        entries = self.profile.entries
        self.p(f"Dump Instance Profile state={'EXCLUDE' if self.profile.state else 'INCLUDE'}, {len(entries)} profiles")
        for k, (ind, (state, insts)) in enumerate(entries.items()):
            signed = ind - (1 << 32) if ind & 0x80000000 else ind
            self.p(
                f"\tProfile [{k}] indom={signed} [{indom_str(ind)}] state={'EXCLUDE' if state else 'INCLUDE'} "
                f"{len(insts)} instances"
            )
            if insts:
                self.p("\t\tInstances:" + "".join(f" [{i}]" for i in insts))
        self.p()

    async def _namespace(self, args: list[str]) -> None:
        """dbpmda.c NAMESPACE: load another PMNS, else reload the previous one."""
        path = args[0]
        previous = self.pmns_name
        self.pmns_name = path  # dbpmda shows the new name even when loading fails
        try:
            new = await trio.to_thread.run_sync(load, path)
        except PmnsError as err:
            self.out.flush()
            if not await trio.Path(path).exists():
                self.err.write(f'Error Parsing ASCII PMNS: Cannot open "{path}"\n')
                why = os.strerror(2)
            else:
                where = f"[{err.file}:{err.line}] " if err.line > 0 else ""
                self.err.write(f"{where}Error Parsing ASCII PMNS: {err.reason}\n")
                why = errstr(PmErr.PMNS)
            self.err.write(f'dbpmda: Cannot load namespace from "{path}": {why}\n')
            self.err.write(
                f'dbpmda: Reload namespace from "{previous}"\n' if previous else "dbpmda: Reload default namespace\n"
            )
            self.err.flush()
            return
        self.pmns = new

    async def _do_open(self, stmt: Stmt) -> None:
        """pmda.c ``openpmda`` / ``open_unix_socket`` / ``open_inet_socket``."""
        self.profile_changed = True  # dbpmda.c: on every "open", whether it works or not
        if stmt.open_kind == "dso":
            self.out.flush()
            try:
                await trio.Path(str(stmt.name)).stat()
            except OSError as err:
                self.err.write(f"opendso: {stmt.name}: {err.strerror}\n")
            else:
                self.err.write(f"opendso: DSO PMDAs are not supported by pmda-py dbpmda ({stmt.name})\n")
            return
        if stmt.open_kind == "pipe":
            fname, argv = str(stmt.name), stmt.args
            if not await trio.Path(fname).exists():
                self.out.flush()
                self.err.write(f"openpmda: stat {fname} failed: No such file or directory\n")
                return
            await self.close()
            self.p(f"Start {os.path.basename(fname)} PMDA: {fname}" + "".join(f" {a}" for a in argv))
            self.out.flush()
            try:
                if self.connector is not None:
                    self.client = PmdaClient(await self.connector("pipe", [fname, *argv]), timeout=None)
                else:
                    self.process = await trio.lowlevel.open_process(
                        [fname, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None
                    )
                    self.client = PmdaClient(process_stream(self.process), timeout=None)
                    self.pid = self.process.pid
            except OSError as err:
                self.out.flush()
                self.err.write(f"openpmda: create process failed: {err.strerror or err}\n")
                return
            name = fname
        else:
            kind = stmt.open_kind
            target = str(stmt.name) if kind == "unix" else str(stmt.port)
            if kind == "unix" and self.connector is None:
                try:
                    await trio.Path(target).stat()
                except OSError as err:
                    self.out.flush()
                    self.err.write(f"opensocket: {target}: {err.strerror}\n")
                    return
            await self.close()  # pmda.c: the old PMDA goes before the connect is tried
            try:
                if self.connector is not None:
                    stream = await self.connector(kind, target)
                elif kind == "unix":
                    stream = await connect_socket_pmda(unix=target, retry_for=0)
                else:
                    stream = await connect_socket_pmda(**{kind: stmt.port}, retry_for=0)  # type: ignore[arg-type]
            except (OSError, ValueError) as err:
                self.out.flush()
                self.err.write(f"opensocket: connect: {_strerror(err)}\n")
                return
            label = f"socket {target}" if kind == "unix" else f"{kind} port {stmt.port}"
            self.client = PmdaClient(stream, timeout=None)
            self.p(f"Connect to PMDA on {label}")
            name = target if kind == "unix" else label
        self.profile = _Profile()
        self.profile_changed = True
        self.pmda_name, self.pmda_version = name, None
        try:
            with trio.fail_after(3):
                creds = await self.client.receive(timeout=None)
            if isinstance(creds, CredsPdu):
                self.pmda_version = creds.version
                await self.client.send(CredsPdu.cversion(0, from_=os.getpid()))
            else:
                self.out.flush()
                self.err.write(f"pmdaversion: expecting PDU_CREDS, got PDU type {type(creds).__name__}\n")
        except (trio.TooSlowError, EOFError, WireFormatError):
            self.out.flush()
            self.err.write(f"Warning: no version exchange with PMDA {name} after 3 secs\n")

    async def close(self) -> None:
        if self.client is not None:
            try:
                await self.client.send(ErrorPdu(PmErr.NOTCONN))
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            await self.client.aclose()
            self.client = None
        if self.process is not None:
            with trio.move_on_after(5):
                await self.process.wait()
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
            self.process = None

    async def _send_profile_if_changed(self) -> bool:
        if self.profile_changed:
            assert self.client is not None
            try:
                await self.client.send(self.profile.pdu())
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                self.p("Error: __pmSendProfile() failed: Broken pipe")
                return False
            self.profile_changed = False
        return True

    async def _desc(self, p: int, show: bool) -> PmDesc | None:
        reply = await self._req(DescReqPdu(p))
        if isinstance(reply, DescPdu):
            if show:
                for ln in desc_lines(reply.desc):
                    self.p(ln)
            return reply.desc
        if not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: wrong PDU ({reply.pdu_type:x})")  # type: ignore[union-attr]
        return None

    async def _print_result(self, res: ResultPdu, descs: list[PmDesc] | None) -> None:
        stamp = f"{res.sec}.{res.usec * 1000:09d} {time_of(res.sec)}.{res.usec * 1000:09d}"
        self.p(f"__pmResult dump from 0x0 timestamp: {stamp} numpmid: {len(res.vsets)}")
        for k, vs in enumerate(res.vsets):
            # libpcp's hash chains list the most recently defined name first
            names = list(reversed(self.pmns.names(vs.pmid))) if self.pmns is not None else []
            sep = " or " if descs is not None else ", "
            head = f"  {pmid_str(vs.pmid)} ({sep.join(names) if names else '<noname>'}):"
            if vs.numval == 0:
                self.p(head + " No values returned!")
                continue
            if vs.numval < 0:
                self.p(head + f" {errstr(vs.numval)}")
                continue
            self.p(head + f" numval: {vs.numval} valfmt: {vs.valfmt} vlist[]:")
            for v in vs.values:
                self.p(await self._value_line(vs, v, descs[k] if descs is not None else None))

    async def _value_line(self, vs: ValueSet, v: PmValue, desc: PmDesc | None) -> str:
        if desc is not None:
            show_inst = vs.numval > 1 or desc.indom != PM_INDOM_NULL
        else:
            show_inst = vs.numval > 1 or (v.inst & 0xFFFFFFFF) != PM_INDOM_NULL
        if show_inst:
            name = "???"
            failed = ""
            if desc is not None and self.getiname:
                reply = await self._req(InstanceReqPdu(desc.indom, v.inst))
                if isinstance(reply, InstancePdu) and reply.instances:
                    name = f'"{reply.instances[0].name}"'
                else:
                    # dbpmda has printed "    inst [N" when the lookup fails: its
                    # message lands inside the line, which goes on after it
                    failed = self._reply_error_text(reply) or ""
                    failed += "\n" if failed else ""
            prefix = f"    inst [{v.inst}{failed} or {name}] "
        else:
            prefix = "   "
        if desc is not None:
            text = print_value(vs.valfmt, desc.type, v.value)
        elif vs.valfmt == ValFmt.INSITU:
            text = print_value(vs.valfmt, PmType.UNKNOWN, v.value)
        else:
            blk = v.value
            text = print_value(vs.valfmt, blk.vtype if isinstance(blk, ValueBlock) else PmType.UNKNOWN, blk)
        return f"{prefix}value {text}"

    async def _do_desc(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        self.p(f"PMID: {pmid_str(stmt.pmid)}")
        await self._desc(stmt.pmid, True)

    async def _do_fetch(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        pmids = stmt.pmids
        self.p("PMID(s):" + "".join(f" {pmid_str(p)}" for p in pmids))
        descs: list[PmDesc] | None = None
        if self.getdesc or self.getiname:
            descs = []
            for p in pmids:
                d = await self._desc(p, False)
                if d is None:
                    return
                descs.append(d)
        if not await self._send_profile_if_changed():
            return
        reply = await self._req(FetchPdu(tuple(pmids)))
        if isinstance(reply, ResultPdu):
            await self._print_result(reply, descs)
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: wrong PDU ({reply.pdu_type:x})")  # type: ignore[union-attr]

    async def _do_instance(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        self.p(f"pmInDom: {indom_str(stmt.indom)}")
        inst = stmt.number if stmt.name is None else PM_IN_NULL
        reply = await self._req(InstanceReqPdu(stmt.indom, inst, stmt.name))
        if isinstance(reply, InstancePdu):
            if not reply.instances:
                self.p("Instance domain is empty")
            has_insts = any(e.inst != PM_IN_NULL for e in reply.instances)
            has_names = any(e.name for e in reply.instances) or len(reply.instances) != 1
            for k, e in enumerate(reply.instances):
                line = f"[{k:3d}]"
                if has_insts:
                    line += f" inst: {e.inst}"
                if has_names:
                    line += f' name: "{e.name}"'
                self.p(line)
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_text(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        if stmt.number == 2:
            ident = stmt.indom
            self.p(f"pmInDom: {indom_str(ident)}")
            kind = TextType.INDOM
        else:
            ident = stmt.pmid
            self.p(f"PMID: {pmid_str(ident)}")
            kind = TextType.PMID
        for which in (TextType.ONELINE, TextType.HELP):
            reply = await self._req(TextReqPdu(ident, kind | which))
            if isinstance(reply, TextPdu):
                if which == TextType.ONELINE:
                    self.p(f"[{reply.text}]" if reply.text else "[<no one line help text specified>]")
                else:
                    self.p(reply.text if reply.text else "<no help text specified>")
            elif not self._reply_error(reply):
                self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_store(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        p, value = stmt.pmid, str(stmt.name)
        self.p(f"PMID: {pmid_str(p)}")
        self.p("Getting description...")
        desc = await self._desc(p, False)
        if desc is None:
            return
        if self.profile_changed:
            self.p("Sending Profile...")
            if not await self._send_profile_if_changed():
                return
        self.p("Getting Result Structure...")
        reply = await self._req(FetchPdu((desc.pmid,)))
        if not isinstance(reply, ResultPdu):
            if not self._reply_error(reply):
                self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")
            return
        vs = reply.vsets[0]
        new = parse_store_value(value, desc.type)
        if isinstance(new, str) and new.startswith("Error: ") and desc.type != PmType.STRING:
            self.p(new)
            return
        if vs.numval == 0:
            self.p(f"Error: {pmid_str(p)} not available!")
            return
        if vs.numval < 0:
            self.p(f"Error: {pmid_str(p)}: {errstr(vs.numval)}")
            return
        stored = ValueSet.of(vs.pmid, desc.type, [(v.inst, new) for v in vs.values])
        for k, (old, nv) in enumerate(zip(vs.values, stored.values)):
            head = f"{pmid_str(p)} [{k}]: " if vs.numval > 1 else f"{pmid_str(p)}: "
            self.p(
                head
                + print_value(vs.valfmt, desc.type, old.value)
                + " -> "
                + print_value(stored.valfmt, desc.type, nv.value)
            )
        self.p("Sending Result...")
        ack = await self._req(ResultPdu((stored,), reply.sec, reply.usec))
        if isinstance(ack, ErrorPdu):
            if ack.code < 0:
                self.p(f"Error PDU: {errstr(ack.code)}")
        elif ack is None:
            self.p("Error: __pmGetPDU() failed: PDU empty, PMDA may have died")
        else:
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_label(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        type_, ident = stmt.number, PM_IN_NULL & 0xFFFFFFFF
        if type_ == 4:
            ident = stmt.indom
            self.p(f"pmInDom: {indom_str(ident)}")
        elif type_ == 8:
            ident = stmt.pmid
            self.p(f"Cluster: {pmid_domain(ident)}.{pmid_cluster(ident)}")
        elif type_ == 16:
            ident = stmt.pmid
            self.p(f"PMID: {pmid_str(ident)}")
        elif type_ == 32:
            ident = stmt.indom
            self.p(f"Instances of pmInDom: {indom_str(ident)}")
            if not await self._send_profile_if_changed():
                return
        reply = await self._req(LabelReqPdu(ident, type_))
        if isinstance(reply, LabelPdu):
            for k, s in enumerate(reply.sets):
                self.p(f"[{k:3d}] Labels inst: {s.inst}" if s.inst != PM_IN_NULL else "Labels:")
                for lb in s.labels:
                    name = s.json[lb.name : lb.name + lb.namelen].decode("utf-8", "replace")
                    val = s.json[lb.value : lb.value + lb.valuelen].decode("utf-8", "replace")
                    self.p(f"    {name}={val}")
            if not reply.sets:
                self.p("Info: __pmDecodeLabel() returns 0 label sets")
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_pmid(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        name = str(stmt.name)
        self.p(f"Metric: {name}")
        reply = await self._req(PmnsNamesPdu((name,)))
        if isinstance(reply, PmnsIdsPdu):
            self.p(f"   {pmid_str(reply.pmids[0])}" if reply.pmids else "   ")
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_name(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        self.p(f"PMID: {pmid_str(stmt.pmid)}")
        reply = await self._req(PmnsIdsPdu((stmt.pmid,), 0))
        if isinstance(reply, PmnsNamesPdu):
            for n in reply.names:
                self.p(f"   {n}")
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_children(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        self.p(f"Metric: {stmt.name}")
        reply = await self._req(PmnsChildPdu(str(stmt.name), 1))
        if isinstance(reply, PmnsNamesPdu):
            statuses = reply.statuses or (0,) * len(reply.names)
            for n, st in zip(reply.names, statuses):
                self.p(f"   {'non-leaf' if st == 1 else 'leaf':>8.8} {n}")
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_traverse(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        self.p(f"Metric: {stmt.name}")
        reply = await self._req(PmnsTraversePdu(str(stmt.name), 0))
        if isinstance(reply, PmnsNamesPdu):
            for n in reply.names:
                self.p(f"   {n}")
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_attr(self, stmt: Stmt) -> None:
        if self._no_pmda():
            return
        value = stmt.name
        self.p(f"Attribute: {ATTR_NAMES[stmt.number]}={value if value is not None else chr(39) * 2}")
        assert self.client is not None
        raw = (value.encode() + b"\0") if value is not None else b""
        try:
            await self.client.send(AttrPdu(stmt.number, raw, 0))
            self.p("Success")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.p("Error: __pmSendAuth() failed: Broken pipe")

    async def _do_watch(self, stmt: Stmt) -> None:
        """util.c ``watch``: ``system("xterm ... -e tail -f FILE &")``.  The
        xterm is started without a shell; without one, the message sh gives."""
        fname = str(stmt.name)
        xterm = shutil.which("xterm")
        if xterm is None:
            self.out.flush()
            self.err.write("sh: 1: xterm: not found\n")
            self.err.flush()
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

    async def _do_namespace(self, stmt: Stmt) -> None:
        await self._namespace([str(stmt.name)])


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
    "DESC": DbpmdaSession._do_desc,
    "FETCH": DbpmdaSession._do_fetch,
    "INSTANCE": DbpmdaSession._do_instance,
    "INFO": DbpmdaSession._do_text,
    "STORE": DbpmdaSession._do_store,
    "LABEL": DbpmdaSession._do_label,
    "PMNS_PMID": DbpmdaSession._do_pmid,
    "PMNS_NAME": DbpmdaSession._do_name,
    "PMNS_CHILDREN": DbpmdaSession._do_children,
    "PMNS_TRAVERSE": DbpmdaSession._do_traverse,
    "ATTR": DbpmdaSession._do_attr,
}


async def run_script(lines: Sequence[str], session: DbpmdaSession) -> int:
    """Run a script to its end (or ``quit``), then close the PMDA."""
    try:
        await session.run_lines(lines)
    finally:
        await session.close()
        session.out.flush()
    return 0
