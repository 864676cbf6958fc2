"""``pmda-py dbpmda``: dbpmda's command language, and its transcript.

Reads dbpmda commands from stdin or a file and prints what PCP's dbpmda
prints for them, line for line (memory addresses aside): ``open pipe|socket``,
``close``, ``desc``, ``fetch``, ``instance``, ``text``, ``profile``, ``store``,
``children``, ``traverse``, ``pmid``, ``name``, ``label``, ``attr``,
``getdesc``, ``getiname``, ``timer``, ``wait``, ``namespace``, ``quit``.
Names resolve through a PMNS file (``-n``, default ``$PCP_VAR_DIR/pmns/root``);
names below a dynamic subtree are asked of the PMDA, as dbpmda does.
Normal output goes to stdout, warnings and errors to stderr, as dbpmda's do.

The formats follow dbpmda's ``pmda.c``/``util.c`` and libpcp's
``__pmPrintResult``, ``pmPrintValue``, ``pmPrintDesc`` and ``pmUnitsStr``.

Library use: :class:`DbpmdaSession` (``await session.execute(line)``).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

import trio

from pmda_py.errors import PmErr, WireFormatError, errstr
from pmda_py.namespace import Namespace, PmnsError, load
from pmda_py.pcpversion import pcp_version
from pmda_py.pmapi import (
    DYNAMIC_PMID,
    PM_IN_NULL,
    PM_INDOM_NULL,
    LabelType,
    PmDesc,
    PmType,
    PmUnits,
    TextType,
    indom,
    indom_str,
    pmid,
    pmid_cluster,
    pmid_domain,
    pmid_str,
)
from pmda_py.testing.client import PmdaClient, connect_socket_pmda, process_stream
from pmda_py.wire import (
    AttrPdu,
    CredsPdu,
    DescPdu,
    DescReqPdu,
    ErrorPdu,
    EventArray,
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

__all__ = ["DbpmdaSession", "format_units", "main", "print_value"]

_ATTR_KEYS = {
    "protocol": 1, "securesockets": 2, "compress": 3, "userauth": 4, "username": 5, "authname": 6,
    "password": 7, "method": 8, "realm": 9, "unixsock": 10, "userid": 11, "groupid": 12, "local": 13,
    "processid": 14, "container": 15, "exclusive": 16,
}  # fmt: skip
_ATTR_NAMES = {v: k for k, v in _ATTR_KEYS.items()}

# dbpmda's lexer: several spellings of one command
_ALIASES = {"q": "quit", "exit": "quit", "attribute": "attr", "?": "help"}

# util.c dohelp(): usage lines, and the text "help COMMAND" adds
_HELP: dict[str, tuple[str, str]] = {
    "attr": ("attr name [value]\nattr attr# [value]",
             "Set a security attribute. These set aspects of per-user authentication,\n"
             "allowing a PMDA to provide different metric views for different users.\n"),
    "children": ("children metric-name",
                 "Fetch and print the next name component of the direct decendents of\n"
                 "metric-name in the PMNS, reporting for each if it is a leaf node or a\n"
                 "non-leaf node.\nMost useful for PMDAs that support dynamic metrics in the PMNS.\n"),
    "close": ("close", "Close the pipe to a daemon PMDA or dlclose(3) a DSO PMDA. dbpmda does not\n"
                       "exit, allowing another PMDA to be opened.\n"),
    "debug": ("debug all | none\ndebug [-]flag [ [-]flag ... ] (- prefix to clear)",
              "Specify which debugging options should be active (see pmdbg(1)).  Options\n"
              "may be specified by name (or number for the old bit-field options), with\n"
              "multiple options separated by white space.  All options may be selected or\n"
              "deselected if 'all' or 'none' is specified.  The current setting is\n"
              "displayed by the status command.\n\n"),
    "desc": ("desc metric", "Print out the meta data description for the 'metric'.  The metric may be\n"
                            "specified by name, or as a PMID of the form N, N.N or N.N.N.\n"),
    "fetch": ("fetch metric [ metric ... ]",
              "Fetch metrics from the PMDA.  The metrics may be specified as a list of\n"
              "metric names, or PMIDs of the form N, N.N or N.N.N.\n"),
    "getdesc": ("getdesc on | off", "Before doing a fetch, get the descriptor so that the result of a fetch\n"
                                    "can be printed out correctly.\n"),
    "getiname": ("getiname on | off",
                 "After a fetch if the metric has an associated instance domain then lookup\n"
                 "the external names of any instances returned, rather than reporting the\n"
                 "instance name as ???.\n"),
    "instance": ('instance indom# [ number | name | "name" ]',
                 "List the instances in 'indom'.  The list may be restricted to a specific\n"
                 "instance 'name' or 'number'.\n"),
    "label": ("label context\nlabel domain\nlabel indom indom#\nlabel cluster cluster#\nlabel item metric\n"
              "label instances indom#", ""),
    "name": ("name pmid#", "Print the name of the metric with PMID pmid#.  The pmid# syntax follows\n"
                           "the source PMNS syntax, namely 3 numbers separated by '.' to encode\n"
                           "the domain, cluster and item components of the PMID, e.g.\n"
                           "    name 29.0.1004\n"
                           "Most useful for PMDAs that support dynamic metrics in the PMNS.\n"),
    "namespace": ("namespace fname", "Unload the current Name Space and load up the given Name Space.\n"
                                     "If unsuccessful then will try to reload the previous Name Space.\n"),
    "open": ("open dso dsoname init_routine [ domain# ]\nopen pipe execname [ arg ... ]\n"
             "open socket unix sockname\nopen socket inet port#|service\nopen socket ipv6 port#|service",
             "Open a PMDA as either a DSO, via a network socket (unix/inet/ipv6), or as a\n"
             "daemon (connected with a pipe).  The 'dsoname' and 'execname' fields are\n"
             "the path to the PMDA shared object file or executable.  The first socket PMDA\n"
             "field is the type - either unix (if supported), inet or ipv6.  The 'sockname'\n"
             "argument for unix sockets is a path of a named pipe where a PMDA is listening\n"
             "for connections.  The 'port' argument is a port number, 'serv' a service name\n"
             "typically defined in /etc/services (resolved to a port via getservent(3)).\n"
             "The arguments to this command are similar to a line in the pmcd.conf file.\n"),
    "pmid": ("pmid metric-name", "Print the PMID for the named metric\n"
                                 "Most useful for PMDAs that support dynamic metrics in the PMNS.\n"),
    "profile": ("profile indom# [ all | none ]\nprofile indom# [ add | delete ] number",
                "For the instance domain specified, the profile may be changed to include\n"
                "'all' instances, no instances, add an instance or delete an instance.\n"),
    "quit": ("quit", "Exit dbpmda.  This also closes any open PMDAs.\n"),
    "status": ("status", "Display the state of dbpmda, including which PMDA is connected, which\n"
                         "debug options are set, and the current profile.\n"),
    "store": ('store metric "value"',
              "Store the value (int, real or string) into the 'metric'.  The metric may be\n"
              "specified by name or as a PMID with the format N, N.N, N.N.N.  The value to\n"
              "be stored must be enclosed in quotes.  Unlike the other commands, a store\n"
              "must request a metric description and fetch the metric to determine how to\n"
              "interpret the value, and to allocate the PDU for transmitting the value,\n"
              "respectively.  The current profile will be used.\n"),
    "text": ("text metric\ntext indom indom#",
             "Retrieve the help text for the 'metric' or 'indom' from the PMDA.  The one\n"
             "line message is shown between '[' and ']' with the long message on the next\n"
             "line.  To get the help text for an instance domain requires the word\n"
             "``indom'' before the indom number\n"),
    "timer": ("timer on | off", "Report the response time of the PMDA when sending and receiving PDUs.\n"),
    "traverse": ("traverse metric-name", "Fetch and print all of the decendent metric names below metric-name\n"
                                         "in the PMNS.\n"
                                         "Most useful for PMDAs that support dynamic metrics in the PMNS.\n"),
    "wait": ("wait seconds", "Sleep for this number of seconds\n"),
    "watch": ("watch logfilename", "An xterm window is opened which tails the specified log file.  This window\n"
                                   "must be closed by the user when no longer required.\n"),
}  # fmt: skip
# the order of "help" with no command
_HELP_ORDER = ("attr", "children", "close", "debug", "desc", "fetch", "getdesc", "getiname", "instance", "label",
               "name", "namespace", "open", "pmid", "profile", "quit", "status", "store", "text", "timer",
               "traverse", "wait", "watch")  # fmt: skip
# commands that, given no arguments, print their usage (gram.y: "CMD EOL" -> HELP_USAGE)
_USAGE_WHEN_BARE = frozenset(("open", "desc", "fetch", "store", "text", "instance", "profile", "watch", "name",
                              "pmid", "children", "traverse", "attr", "label", "debug", "timer", "getdesc",
                              "getiname", "wait"))  # fmt: skip
# libpcp's debug options (pmdbg -l, PCP 6.0.3) in the order "status" lists them
_DEBUG_FLAGS = ("pdu", "fetch", "profile", "value", "context", "indom", "pdubuf", "log", "logmeta", "optfetch", "af",
                "appl0", "appl1", "appl2", "pmns", "libpmda", "timecontrol", "pmc", "derive", "lock", "interp",
                "config", "pmapi", "fault", "auth", "discovery", "attr", "http", "desperate", "deprecated", "exec",
                "labels", "series", "libweb", "alloc", "services", "appl3", "appl4", "appl5", "access", "qa",
                "search", "query", "compress", "dev0", "dev1", "dev2", "pmlc", "appl6", "appl7", "appl8", "appl9",
                "tls")  # fmt: skip
# pmSetDebug("N"): the old bit-field options
_DEBUG_BITS = {**dict(enumerate(_DEBUG_FLAGS[:28])), 30: "desperate"}

_TYPE_NAMES: dict[int, str] = {
    PmType.I32: "32-bit int", PmType.U32: "32-bit unsigned int", PmType.I64: "64-bit int",
    PmType.U64: "64-bit unsigned int", PmType.FLOAT: "float", PmType.DOUBLE: "double", PmType.STRING: "string",
    PmType.AGGREGATE: "aggregate", PmType.AGGREGATE_STATIC: "static aggregate",
    PmType.EVENT: "event record array", PmType.HIGHRES_EVENT: "highres event record array",
}  # fmt: skip
_TYPE_STR = {  # pmTypeStr
    -1: "NOSUPPORT", 0: "32", 1: "U32", 2: "64", 3: "U64", 4: "FLOAT", 5: "DOUBLE", 6: "STRING",
    7: "AGGREGATE", 8: "AGGREGATE_STATIC", 9: "EVENT", 10: "HIGHRES_EVENT", 255: "UNKNOWN",
}  # fmt: skip
_SEM = {1: "counter", 3: "instant", 4: "discrete"}


def format_units(u: PmUnits) -> str:
    """libpcp's ``pmUnitsStr`` (6.0.3: no extra units)."""
    space = time_ = count = ""
    if u.dim_space:
        space = ["byte", "Kbyte", "Mbyte", "Gbyte", "Tbyte", "Pbyte", "Ebyte", "Zbyte", "Ybyte"][u.scale_space] \
            if 0 <= u.scale_space <= 8 else f"space-{u.scale_space}"  # fmt: skip
    if u.dim_time:
        time_ = ["nanosec", "microsec", "millisec", "sec", "min", "hour"][u.scale_time] \
            if 0 <= u.scale_time <= 5 else f"time-{u.scale_time}"  # fmt: skip
    if u.dim_count:
        count = "count" if u.scale_count == 0 else ("count x 10" if u.scale_count == 1 else
                                                    f"count x 10^{u.scale_count}")  # fmt: skip
    parts: list[str] = []
    for dim, s in ((u.dim_space, space), (u.dim_time, time_), (u.dim_count, count)):
        if dim > 0:
            parts.append(s + ("" if dim == 1 else f"^{dim}"))
    if u.dim_space < 0 or u.dim_time < 0 or u.dim_count < 0:
        parts.append("/")
        for dim, s in ((u.dim_space, space), (u.dim_time, time_), (u.dim_count, count)):
            if dim < 0:
                parts.append(s + ("" if dim == -1 else f"^{-dim}"))
    text = " ".join(parts)
    if not text and u.scale_count != 0:
        text = "count x 10" if u.scale_count == 1 else f"count x 10^{u.scale_count}"
    return text


def _g(value: float, digits: int) -> str:
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"%.{digits}g" % value


def _time_of(sec: int) -> str:
    t = time.localtime(sec)
    return f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"


def _event_summary(arr: EventArray) -> str:
    """libpcp's ``print_event_summary``, quirk included: its walk to the last
    record does not step past a MISSED record, so after one it stays there
    (counting its missed events again) and prints its timestamp as the last."""
    recs = arr.records
    nmissed = 0
    cur = 0
    for _ in range(len(recs) - 1):
        rec = recs[cur]
        if rec.flags & 0x80000000:
            nmissed += rec.nparams or 0
            continue
        cur += 1
    out = f"[{len(recs)} event record" + ("" if len(recs) == 1 else "s")
    if nmissed > 0:
        out += f" ({nmissed} missed)"
    if recs:
        out += " timestamp" + ("s" if len(recs) > 1 else "") + " "

        def stamp(r: Any) -> str:
            frac = f"{r.subsec:09d}" if arr.highres else f"{r.subsec // 1000:03d}"
            return f"{_time_of(r.sec)}.{frac}"

        out += stamp(recs[0])
        if len(recs) > 1:
            out += "..." + stamp(recs[cur])
    return out + "]"


def print_value(valfmt: int, type_: int, value: int | ValueBlock) -> str:
    """libpcp's ``pmPrintValue(f, valfmt, type, val, 1)``."""
    if type_ not in (PmType.UNKNOWN, PmType.EVENT, PmType.HIGHRES_EVENT, PmType.AGGREGATE):
        try:
            atom = _extract(valfmt, type_, value)
        except (ValueError, TypeError, WireFormatError, struct.error):
            type_ = PmType.UNKNOWN
        else:
            if type_ in (PmType.I32, PmType.U32, PmType.I64, PmType.U64):
                return str(atom)
            if type_ == PmType.FLOAT:
                return _g(float(atom), 8)
            if type_ == PmType.DOUBLE:
                return _g(float(atom), 16)
            if type_ == PmType.STRING:
                return f'"{atom}"'
    if type_ in (PmType.EVENT, PmType.HIGHRES_EVENT):
        if isinstance(value, ValueBlock):
            try:
                return _event_summary(value.event_array())
            except WireFormatError:
                return "[bad event record array]"
        return "[pmlc control]"
    # UNKNOWN and AGGREGATE
    if not isinstance(value, ValueBlock):
        word = value & 0xFFFFFFFF
        out = f"{word}"
        f = struct.unpack("<f", struct.pack("<I", word))[0]
        if not math.isnan(f):
            out += " " + _g(f, 8)
        return out + f" 0x{word:x}"
    data = value.payload
    parts: list[str] = []
    if len(data) == 8:
        parts.append(str(struct.unpack(">Q", data)[0]))
        d = struct.unpack(">d", data)[0]
        if not math.isnan(d):
            parts.append(_g(d, 16))
    if len(data) == 4:
        f = struct.unpack(">f", data)[0]
        if not math.isnan(f):
            parts.append(_g(f, 8))
    if data and all(32 <= b < 127 for b in data):
        parts.append('"' + data.decode("ascii") + '"')
    elif not data and True:
        parts.append('""')
    parts.append("[" + data.hex() + "]")
    return " ".join(parts)


def _extract(valfmt: int, type_: int, value: int | ValueBlock) -> int | float | str:
    if valfmt == ValFmt.INSITU:
        if isinstance(value, ValueBlock):
            raise TypeError
        w = value & 0xFFFFFFFF
        if type_ == PmType.I32:
            return w - (1 << 32) if w & 0x80000000 else w
        if type_ == PmType.U32:
            return w
        if type_ == PmType.FLOAT:
            return float(struct.unpack("<f", struct.pack("<I", w))[0])
        if type_ in (PmType.I64, PmType.U64, PmType.DOUBLE):
            return w if type_ != PmType.DOUBLE else float(w)
        raise TypeError
    if not isinstance(value, ValueBlock):
        raise TypeError
    v = ValueBlock(type_, value.payload).value() if value.vtype == type_ else _convert(value, type_)
    if isinstance(v, bytes):
        raise TypeError
    return v


def _convert(block: ValueBlock, type_: int) -> int | float | str:
    v = block.value()
    if isinstance(v, bytes) or isinstance(v, str) != (type_ == PmType.STRING):
        raise TypeError
    if type_ in (PmType.I64, PmType.U64, PmType.I32, PmType.U32) and isinstance(v, int):
        return v
    if type_ in (PmType.FLOAT, PmType.DOUBLE) and isinstance(v, (int, float)):
        return float(v)
    raise TypeError


def _desc_lines(d: PmDesc) -> list[str]:
    if d.type == PmType.NOSUPPORT:
        return ["    Data Type: Not Supported"]
    tname = _TYPE_NAMES.get(d.type, "???")
    line = f"    Data Type: {tname}" + (f" ({d.type})" if tname == "???" else "")
    line += f"  InDom: {indom_str(d.indom)} 0x{d.indom:x}"
    sem = _SEM.get(d.sem, "???")
    units = format_units(d.units) or "none"
    return [line, f"    Semantics: {sem}" + (f" ({d.sem})" if sem == "???" else "") + f"  Units: {units}"]


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

    def _change(self, ind: int, insts: Sequence[int], state: int) -> None:
        """Move ``insts`` towards ``state`` (0 INCLUDE, 1 EXCLUDE); the
        entry's list holds the exceptions to its own state."""
        e = self._entry(ind)
        if not insts:
            e[0], e[1] = state, []
        elif e[0] == state:
            e[1] = [i for i in e[1] if i not in insts]
        else:
            e[1] += [i for i in insts if i not in e[1]]

    def pdu(self) -> ProfilePdu:
        return ProfilePdu(0, 0, tuple(ProfileEntry(i, s, tuple(lst)) for i, (s, lst) in self.entries.items()))


class _Lex:
    """dbpmda's tokens for one command line."""

    TOKEN = re.compile(r"""\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|(,)|([^\s,"']+))""")

    def __init__(self, line: str) -> None:
        self.toks: list[tuple[str, str]] = []
        self.spans: list[tuple[int, int]] = []  # (start, end) of each token
        pos = 0
        line = line.rstrip("\n")
        self.line = line
        while pos < len(line):
            m = self.TOKEN.match(line, pos)
            if m is None or m.end() == pos:
                if line[pos:].strip():
                    raise SyntaxError("Illegal character")
                break
            pos = m.end()
            self.spans.append((m.end() - len(m.group(0).lstrip()), m.end()))
            if m.group(1) is not None:
                self.toks.append(("STRING", m.group(1)))
            elif m.group(2) is not None:
                self.toks.append(("STRING", m.group(2)))
            elif m.group(3):
                self.toks.append(("COMMA", ","))
            else:
                self.toks.append(("WORD", m.group(4)))


class _ParseError(Exception):
    """A command that dbpmda's grammar rejects: message and offending token."""

    def __init__(self, message: str, token: int) -> None:
        super().__init__(message)
        self.token = token


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
        #: what ``status`` shows: the PMNS file, the PMDA, its pid, its PDU version
        self.pmns_name: str | None = None
        self.pmda_name: str | None = None
        self.pid = 0
        self.pmda_version: int | None = None
        self.debug: set[str] = set()
        self._captured: list[str] | None = None
        #: optional replacement for starting/connecting a PMDA: called with
        #: ("pipe", argv) or ("unix"|"inet"|"ipv6", address) and returns a stream
        self.connector: Any = None

    # -- output
    def p(self, text: str = "") -> None:
        self.out.write(text + "\n")
        if self._captured is not None:
            self._captured.append(text + "\n")

    def warn(self, msg: str) -> None:
        self.out.flush()
        self.err.write(f"Warning: {msg}\n")
        self.err.flush()

    def error(self, msg: str, lex: _Lex | None = None, token: int = 0) -> None:
        """yyerror: a caret under the offending token on stdout (dbpmda's
        ``locateError``), then the message on stderr."""
        if lex is not None:
            self.p(" " * (7 + _mark(lex, token)) + "^ at or near here")
        self.out.flush()
        self.err.write(f"Error: {msg}\nType 'help' for a list of commands.\n")
        self.err.flush()

    # -- lexing helpers
    def _numeric_metric(self, tok: str) -> int:
        m3 = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", tok)
        m2 = re.fullmatch(r"(\d+)\.(\d+)", tok)
        if m3:
            p = pmid(*(int(x) for x in m3.groups()))
        elif m2:
            p = pmid(0, int(m2.group(1)), int(m2.group(2)))
        else:
            p = int(tok)
        if self.pmns is None or not self.pmns.names(p):
            self.warn(f"PMID ({pmid_str(p)}) is not defined in the PMNS")
        return p

    @staticmethod
    def _indom(tok: str) -> int:
        m = re.fullmatch(r"(\d+)\.(\d+)", tok)
        if m:
            return indom(int(m.group(1)), int(m.group(2)))
        return int(tok) & 0xFFFFFFFF

    # -- the requests
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
        if reply is None:
            self.p(f"Error: {what}() failed: PDU empty, PMDA may have died")
            return True
        if isinstance(reply, ErrorPdu):
            self.p(f"Error PDU: {errstr(reply.code)}")
            return True
        return False

    async def execute(self, line: str) -> str:
        """Run one command line (already echoed if ``echo``); returns what it
        printed on ``out`` (it is written there too)."""
        self._captured = []
        try:
            await self._execute(line)
        finally:
            captured, self._captured = self._captured, None
        return "".join(captured)

    async def _execute(self, line: str) -> None:
        try:
            lex = _Lex(line)
        except SyntaxError as err:
            self.error(str(err))
            return
        toks = lex.toks
        if not toks:
            return
        words = [t[1] for t in toks if t[0] != "COMMA"]
        cmd = _ALIASES.get(words[0], words[0]) if toks[0][0] == "WORD" else words[0]
        args = words[1:]
        t0 = time.monotonic()
        self._lex = lex
        try:
            await self._dispatch(cmd, args, toks, line)
        except _ParseError as err:
            self.error(str(err), lex, err.token)
            return
        if self.timer and cmd in ("desc", "fetch", "instance", "store", "text", "label", "pmid", "name",
                                  "children", "traverse", "attr"):  # fmt: skip
            self.p(f"Timer: {time.monotonic() - t0:f} seconds")

    async def _dispatch(self, cmd: str, args: list[str], toks: list[tuple[str, str]], line: str) -> None:
        if cmd in _USAGE_WHEN_BARE and len(toks) == 1:
            self.p(_HELP[cmd][0])
            return
        if cmd == "help":
            self._help(args, toks)
            return
        if cmd == "status":
            if len(toks) > 1:
                raise _ParseError("syntax error", 1)
            self._status()
            return
        if cmd == "debug":
            self._debug(toks)
            return
        if cmd == "watch":
            return  # dbpmda starts an xterm tailing the file: nothing to print
        if cmd == "quit":
            await self.close()
            self.done = True
            return
        if cmd == "close":
            if self.client is None:
                self.warn("No PMDA currently opened")
            await self.close()
            return
        if cmd == "open":
            await self._open(args, line)
            return
        if cmd in ("getdesc", "getiname", "timer"):
            if not args or args[0] not in ("on", "off"):
                raise _ParseError("syntax error", min(1, len(toks) - 1))
            setattr(self, cmd, args[0] == "on")
            return
        if cmd == "wait":
            await trio.sleep(int(args[0]) if args else 0)
            return
        if cmd == "namespace":
            await self._namespace(args)
            return
        if cmd == "profile":
            if len(args) < 2:
                raise _ParseError("syntax error", len(toks) - 1)
            ind = self._indom(args[0])
            if args[1] == "all":
                self.profile.add(ind, [])
            elif args[1] == "none":
                self.profile.delete(ind, [])
            elif args[1] == "add" and len(args) > 2:
                self.profile.add(ind, [int(args[2])])
            elif args[1] == "delete" and len(args) > 2:
                self.profile.delete(ind, [int(args[2])])
            else:
                raise _ParseError("syntax error", 2 if args[1] not in ("add", "delete") else 3)
            self.profile_changed = True
            return
        if cmd not in ("desc", "fetch", "instance", "text", "store", "label", "pmid", "name", "children",
                       "traverse", "attr"):  # fmt: skip
            raise _ParseError("Unrecognized command", 0)
        if self.client is None:
            # the arguments are parsed (and checked) before the connection is
            self._check_args(cmd, args, toks)
            self.warn("No PMDA currently opened")
            return
        await getattr(self, f"_do_{cmd}")(args, toks)

    def _help(self, args: list[str], toks: list[tuple[str, str]]) -> None:
        """util.c ``dohelp``."""
        if len(toks) == 1:
            self.p("help [ command ]\n")
            for name in _HELP_ORDER:
                self.p(_HELP[name][0])
            self.p()
            return
        name = _ALIASES.get(args[0], args[0]) if toks[1][0] == "WORD" else ""
        if len(toks) > 2 or name not in _HELP:
            raise _ParseError("syntax error", 1 if name not in _HELP else 2)
        usage, text = _HELP[name]
        self.p()
        self.p(usage)
        self.p()
        if text:
            self.p(text)

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
        if len(self.debug) == len(_DEBUG_FLAGS):
            flags = "(all)"
        else:
            flags = " ".join(f for f in _DEBUG_FLAGS if f in self.debug) or "(none)"
        self.p(f"Debug options:          {flags}")
        self.p(f"Timer:                  {'on' if self.timer else 'off'}")
        self.p(f"Getdesc:                {'on' if self.getdesc else 'off'}")
        self.p(f"Getiname:               {'on' if self.getiname else 'off'}")
        self.p()
        entries = self.profile.entries
        self.p(f"Dump Instance Profile state=INCLUDE, {len(entries)} profiles")
        for k, (ind, (state, insts)) in enumerate(entries.items()):
            signed = ind - (1 << 32) if ind & 0x80000000 else ind
            self.p(f"\tProfile [{k}] indom={signed} [{indom_str(ind)}] state={'EXCLUDE' if state else 'INCLUDE'} "
                   f"{len(insts)} instances")  # fmt: skip
            if insts:
                self.p("\t\tInstances:" + "".join(f" [{i}]" for i in insts))
        self.p()

    def _debug(self, toks: list[tuple[str, str]]) -> None:
        """``debug all | none | [-]flag ...``: kept for ``status``.  (Real
        dbpmda also turns on libpcp's diagnostics, which are not imitated.)
        Each flag takes effect as it is parsed, so those before an error stay."""
        words = [(k, w) for k, (kind, w) in enumerate(toks) if k and kind != "COMMA"]
        if [w for _, w in words] in (["all"], ["none"]):
            self.debug = set(_DEBUG_FLAGS) if words[0][1] == "all" else set()
            return
        for k, w in words:
            if w in ("all", "none") and k == 1:  # "debug all|none" then more: the parser fails on the next token
                raise _ParseError("syntax error", 2)
            if w in ("all", "none") or re.fullmatch(r"-\d+", w) or toks[k][0] != "WORD":
                raise _ParseError("syntax error", k)
            if w.isdigit():
                if pcp_version() >= (7, 0, 0):  # 7.x's pmSetDebug takes no numeric flags
                    raise _ParseError(f"Bad debug flag ({w})", k)
                value = int(w)
                if value < 1 << 31:  # atoi() of a bigger one: no flags, as observed
                    self.debug |= {f for b, f in _DEBUG_BITS.items() if value >> b & 1}
                continue
            clear, name = (True, w[1:]) if w.startswith("-") else (False, w)
            if name not in _DEBUG_FLAGS:
                raise _ParseError(f"Bad debug flag ({w})", k)
            if clear:
                self.debug.discard(name)
            else:
                self.debug.add(name)

    async def _namespace(self, args: list[str]) -> None:
        """dbpmda.c NAMESPACE: load another PMNS, else reload the previous one."""
        if not args:
            raise _ParseError("syntax error", 0)
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
            self.err.write(f'dbpmda: Reload namespace from "{previous}"\n' if previous
                           else "dbpmda: Reload default namespace\n")  # fmt: skip
            self.err.flush()
            return
        self.pmns = new

    def _check_args(self, cmd: str, args: list[str], toks: list[tuple[str, str]]) -> None:
        if cmd in ("desc", "fetch", "store") or (cmd == "text" and args and args[0] != "indom"):
            for k, tok in enumerate(toks[1:], 1):
                if tok[0] == "WORD":
                    self._metric_pre(tok[1], k)
                if cmd in ("desc", "text", "store"):
                    break
        if cmd == "label" and len(args) > 1 and args[0] == "item":
            self._metric_pre(args[1], 2)
        if cmd == "instance" and len(toks) > 3:
            raise _ParseError("syntax error", 3)
        if cmd == "attr" and len(toks) > 1:
            kind, key = toks[1]
            if (kind == "WORD" and key.isdigit() and int(key) not in _ATTR_NAMES) or (
                not (kind == "WORD" and key.isdigit()) and key not in _ATTR_KEYS
            ):
                raise _ParseError(f"Attribute ({key}) is not recognised", 1)

    async def _open(self, args: list[str], line: str) -> None:
        if len(args) < 2:
            self.error("Unrecognized command")
            return
        if args[0] == "pipe":
            rest = line.split(None, 2)[2].strip()
            argv = shlex.split(rest, posix=True) if rest else []
            fname = argv[0]
            if not fname.startswith("/"):
                fname = "./" + fname
            if not await trio.Path(fname).exists():
                self.out.flush()
                self.err.write(f"openpmda: stat {fname} failed: No such file or directory\n")
                return
            await self.close()
            self.p(f"Start {os.path.basename(fname)} PMDA: {fname}" + "".join(f" {a}" for a in argv[1:]))
            self.out.flush()
            if self.connector is not None:
                self.client = PmdaClient(await self.connector("pipe", [fname, *argv[1:]]), timeout=None)
            else:
                self.process = await trio.lowlevel.open_process(
                    [fname, *argv[1:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None
                )
                self.client = PmdaClient(process_stream(self.process), timeout=None)
                self.pid = self.process.pid
            name = fname
        elif args[0] == "socket":
            kind = args[1] if len(args) > 2 else "unix"
            target = args[2] if len(args) > 2 else args[1]
            try:
                if self.connector is not None:
                    stream = await self.connector(kind, target)
                    label = f"socket {target}" if kind == "unix" else f"{kind} port {int(target)}"
                elif kind == "unix":
                    try:
                        await trio.Path(target).stat()
                    except OSError as err:
                        self.out.flush()
                        self.err.write(f"opensocket: {target}: {err.strerror}\n")
                        return
                    stream = await connect_socket_pmda(unix=target, retry_for=0)
                    label = f"socket {target}"
                else:
                    port = int(target)
                    stream = await connect_socket_pmda(**{kind: port}, retry_for=0)  # type: ignore[arg-type]
                    label = f"{kind} port {port}"
            except OSError as err:
                self.out.flush()
                self.err.write(f"opensocket: connect: {err.strerror or err}\n")
                return
            await self.close()
            self.client = PmdaClient(stream, timeout=None)
            self.p(f"Connect to PMDA on {label}")
            name = target if kind == "unix" else label
        else:
            self.error("Unrecognized command")
            return
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
                for ln in _desc_lines(reply.desc):
                    self.p(ln)
            return reply.desc
        if not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: wrong PDU ({reply.pdu_type:x})")  # type: ignore[union-attr]
        return None

    async def _resolve_metrics(self, args: list[str]) -> list[int]:
        out = []
        for k, a in enumerate(args, 1):
            out.append(await self._resolve(a, k))
        return out

    async def _resolve(self, tok: str, index: int = 1) -> int:
        p = self._metric_pre(tok, index)
        if isinstance(p, str):  # a name below a dynamic subtree: ask the PMDA
            reply = await self._req(PmnsNamesPdu((p,)))
            if isinstance(reply, PmnsIdsPdu) and reply.pmids:
                return reply.pmids[0]
            code = reply.code if isinstance(reply, ErrorPdu) else PmErr.IPC
            raise _ParseError(errstr(code), index)
        return p

    def _metric_pre(self, tok: str, index: int = 1) -> int | str:
        m3 = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", tok)
        m2 = re.fullmatch(r"(\d+)\.(\d+)", tok)
        if m3 or m2 or tok.isdigit():
            return self._numeric_metric(tok)
        if self.pmns is None:
            raise _ParseError(errstr(PmErr.NOPMNS), index)
        try:
            p = self.pmns.lookup(tok)
        except KeyError:
            raise _ParseError(errstr(PmErr.NAME), index) from None
        if pmid_domain(p) == DYNAMIC_PMID:
            return tok
        return p

    async def _do_desc(self, args: list[str], toks: Any) -> None:
        p = await self._resolve(args[0])
        self.p(f"PMID: {pmid_str(p)}")
        await self._desc(p, True)

    async def _do_fetch(self, args: list[str], toks: Any) -> None:
        pmids = await self._resolve_metrics(args)
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

    async def _print_result(self, res: ResultPdu, descs: list[PmDesc] | None) -> None:
        stamp = f"{res.sec}.{res.usec * 1000:09d} {_time_of(res.sec)}.{res.usec * 1000:09d}"
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
            if desc is not None and self.getiname:
                reply = await self._req(InstanceReqPdu(desc.indom, v.inst))
                if isinstance(reply, InstancePdu) and reply.instances:
                    name = f'"{reply.instances[0].name}"'
                else:
                    self._reply_error(reply)
            prefix = f"    inst [{v.inst} or {name}] "
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

    async def _do_instance(self, args: list[str], toks: list[tuple[str, str]]) -> None:
        if len(toks) > 3:
            raise _ParseError("syntax error", 3)
        ind = self._indom(args[0])
        self.p(f"pmInDom: {indom_str(ind)}")
        inst, name = PM_IN_NULL, None
        if len(toks) > 2:
            kind, val = toks[2]
            if kind == "WORD" and re.fullmatch(r"-?\d+", val):
                inst = int(val)
            else:
                name = val
        reply = await self._req(InstanceReqPdu(ind, inst, name))
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

    async def _do_text(self, args: list[str], toks: Any) -> None:
        if args[0] == "indom":
            ident = self._indom(args[1])
            self.p(f"pmInDom: {indom_str(ident)}")
            kind = TextType.INDOM
        else:
            ident = await self._resolve(args[0])
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

    async def _do_store(self, args: list[str], toks: list[tuple[str, str]]) -> None:
        p = await self._resolve(args[0])
        value = toks[-1][1] if toks[-1][0] == "STRING" else None
        if value is None:
            self.error("Unrecognized command")
            return
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
        new = _parse_store_value(value, desc.type)
        if isinstance(new, str) and new.startswith("Error: "):
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
            self.p(head + print_value(vs.valfmt, desc.type, old.value) + " -> "
                   + print_value(stored.valfmt, desc.type, nv.value))  # fmt: skip
        self.p("Sending Result...")
        ack = await self._req(ResultPdu((stored,), reply.sec, reply.usec))
        if isinstance(ack, ErrorPdu):
            if ack.code < 0:
                self.p(f"Error PDU: {errstr(ack.code)}")
        elif ack is None:
            self.p("Error: __pmGetPDU() failed: PDU empty, PMDA may have died")
        else:
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_label(self, args: list[str], toks: Any) -> None:
        what = args[0]
        ident = PM_IN_NULL & 0xFFFFFFFF
        if what == "context":
            type_ = LabelType.CONTEXT
        elif what == "domain":
            type_ = LabelType.DOMAIN
        elif what == "indom":
            type_, ident = LabelType.INDOM, self._indom(args[1])
            self.p(f"pmInDom: {indom_str(ident)}")
        elif what == "cluster":
            m = re.fullmatch(r"(\d+)\.(\d+)", args[1])
            ident = pmid(int(m.group(1)), int(m.group(2)), 0) if m else int(args[1])
            type_ = LabelType.CLUSTER
            self.p(f"Cluster: {pmid_domain(ident)}.{pmid_cluster(ident)}")
        elif what == "item":
            ident = await self._resolve(args[1], 2)
            type_ = LabelType.ITEM
            self.p(f"PMID: {pmid_str(ident)}")
        elif what == "instances":
            ident = self._indom(args[1])
            type_ = LabelType.INSTANCES
            self.p(f"Instances of pmInDom: {indom_str(ident)}")
            if not await self._send_profile_if_changed():
                return
        else:
            self.error("Unrecognized command")
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

    async def _do_pmid(self, args: list[str], toks: Any) -> None:
        self.p(f"Metric: {args[0]}")
        reply = await self._req(PmnsNamesPdu((args[0],)))
        if isinstance(reply, PmnsIdsPdu):
            self.p(f"   {pmid_str(reply.pmids[0])}" if reply.pmids else "   ")
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_name(self, args: list[str], toks: Any) -> None:
        m = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", args[0])
        if not m:
            self.error("Unrecognized command")
            return
        p = pmid(*(int(x) for x in m.groups()))
        self.p(f"PMID: {pmid_str(p)}")
        reply = await self._req(PmnsIdsPdu((p,), 0))
        if isinstance(reply, PmnsNamesPdu):
            for n in reply.names:
                self.p(f"   {n}")
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_children(self, args: list[str], toks: Any) -> None:
        self.p(f"Metric: {args[0]}")
        reply = await self._req(PmnsChildPdu(args[0], 1))
        if isinstance(reply, PmnsNamesPdu):
            statuses = reply.statuses or (0,) * len(reply.names)
            for n, st in zip(reply.names, statuses):
                self.p(f"   {'non-leaf' if st == 1 else 'leaf':>8.8} {n}")
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_traverse(self, args: list[str], toks: Any) -> None:
        self.p(f"Metric: {args[0]}")
        reply = await self._req(PmnsTraversePdu(args[0], 0))
        if isinstance(reply, PmnsNamesPdu):
            for n in reply.names:
                self.p(f"   {n}")
        elif not self._reply_error(reply):
            self.p(f"Error: __pmGetPDU() failed: {errstr(PmErr.IPC)}")

    async def _do_attr(self, args: list[str], toks: list[tuple[str, str]]) -> None:
        kind, key = toks[1]
        if kind == "WORD" and key.isdigit():
            code = int(key)
            if code not in _ATTR_NAMES:
                raise _ParseError(f"Attribute ({code}) is not recognised", 1)
        else:
            code = _ATTR_KEYS.get(key, 0)
            if not code:
                raise _ParseError(f"Attribute ({key}) is not recognised", 1)
        value = toks[2][1] if len(toks) > 2 else None
        self.p(f"Attribute: {_ATTR_NAMES[code]}={value if value is not None else chr(39) * 2}")
        assert self.client is not None
        raw = (value.encode() + b"\0") if value is not None else b""
        try:
            await self.client.send(AttrPdu(code, raw, 0))
            self.p("Success")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            self.p("Error: __pmSendAuth() failed: Broken pipe")


def _mark(lex: _Lex, token: int) -> int:
    """Where dbpmda's lexer stood when the parser gave up at ``token``: just
    past it, plus the one character of lookahead an unquoted token needs
    (none at the end of the line)."""
    if not lex.spans:
        return 0
    token = max(0, min(token, len(lex.spans) - 1))
    _start, end = lex.spans[token]
    quoted = lex.toks[token][0] == "STRING"
    if not quoted and end < len(lex.line):
        end += 1
    return end


def _parse_store_value(text: str, type_: int) -> Any:
    tname = _TYPE_STR.get(type_, str(type_))
    try:
        if type_ in (PmType.I32, PmType.U32, PmType.I64, PmType.U64):
            v = int(text.strip(), 10)
            bits = 32 if type_ in (PmType.I32, PmType.U32) else 64
            if type_ in (PmType.U32, PmType.U64):
                v &= (1 << bits) - 1  # strtoul semantics for negatives
            elif not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
                return f"Error: Decoding value: {os.strerror(34)}"
            return v
        if type_ in (PmType.FLOAT, PmType.DOUBLE):
            return float(text)
        if type_ == PmType.STRING:
            return text
    except ValueError:
        return f'Error: Value "{text}" is incompatible with metric type (PM_TYPE_{tname})'
    return f"Error: dbpmda does not support storing into {tname} metrics"


async def _run(lines: list[str], session: DbpmdaSession) -> int:
    try:
        for line in lines:
            if session.echo:
                session.out.write(line if line.endswith("\n") else line + "\n")
            await session.execute(line)
            session.out.flush()
            if session.done:
                break
    finally:
        await session.close()
        session.out.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``pmda-py dbpmda``."""
    p = argparse.ArgumentParser(prog="pmda-py dbpmda", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("-n", dest="pmns", help="PMNS file (default $PCP_VAR_DIR/pmns/root)")
    p.add_argument("-e", dest="echo", action="store_true", help="echo input commands")
    p.add_argument("-i", dest="interactive", action="store_true", help="interactive (prompt)")
    p.add_argument("-f", dest="nodefault", action="store_true", help="do not load the default PMNS")
    p.add_argument("script", nargs="?", help="command file (default stdin)")
    ns = p.parse_args(list(argv or []))
    pmns: Namespace | None = None
    path = ns.pmns or os.path.join(os.environ.get("PCP_VAR_DIR", "/var/lib/pcp"), "pmns", "root")
    if ns.pmns or (not ns.nodefault and os.path.exists(path)):
        try:
            pmns = load(path)
        except PmnsError as err:
            print(f"pmda-py dbpmda: cannot load namespace: {err}", file=sys.stderr)
            return 1
    text = open(ns.script).read() if ns.script else sys.stdin.read()  # noqa: SIM115
    session = DbpmdaSession(sys.stdout, sys.stderr, pmns, echo=ns.echo)
    session.pmns_name = ns.pmns
    return trio.run(_run, text.splitlines(keepends=True), session)
