"""dbpmda's output formats: libpcp's ``pmPrintValue``, ``pmUnitsStr``,
``pmPrintDesc`` (as dbpmda prints them), the help texts of util.c ``dohelp``
and the tables they use."""

from __future__ import annotations

import math
import struct
import time

from pmda_py.errors import WireFormatError
from pmda_py.pmapi import (
    DYNAMIC_PMID,
    PM_ID_NULL,
    PmDesc,
    PmType,
    PmUnits,
    indom_str,
    pmid_cluster,
    pmid_domain,
    pmid_item,
)
from pmda_py.wire import EventArray, EventRecord, ValFmt, ValueBlock

__all__ = ["desc_lines", "format_units", "pmid_str", "print_value", "time_of"]


def pmid_str(p: int) -> str:
    """libpcp's ``pmIDStr``: ``PM_ID_NULL``, ``C.*.*`` for the root of a
    dynamic subtree (domain 511, item 0: the cluster is the PMDA's domain)."""
    if p == PM_ID_NULL:
        return "PM_ID_NULL"
    if pmid_domain(p) == DYNAMIC_PMID and pmid_item(p) == 0:
        return f"{pmid_cluster(p)}.*.*"
    return f"{pmid_domain(p)}.{pmid_cluster(p)}.{pmid_item(p)}"


ATTR_KEYS = {
    "protocol": 1,
    "securesockets": 2,
    "compress": 3,
    "userauth": 4,
    "username": 5,
    "authname": 6,
    "password": 7,
    "method": 8,
    "realm": 9,
    "unixsock": 10,
    "userid": 11,
    "groupid": 12,
    "local": 13,
    "processid": 14,
    "container": 15,
    "exclusive": 16,
}
ATTR_NAMES = {v: k for k, v in ATTR_KEYS.items()}

# dbpmda's lexer: several spellings of one command

# util.c dohelp(): usage lines, and the text "help COMMAND" adds
HELP: dict[str, tuple[str, str]] = {
    "attr": (
        "attr name [value]\nattr attr# [value]",
        "Set a security attribute. These set aspects of per-user authentication,\n"
        "allowing a PMDA to provide different metric views for different users.\n",
    ),
    "children": (
        "children metric-name",
        "Fetch and print the next name component of the direct decendents of\n"
        "metric-name in the PMNS, reporting for each if it is a leaf node or a\n"
        "non-leaf node.\nMost useful for PMDAs that support dynamic metrics in the PMNS.\n",
    ),
    "close": (
        "close",
        "Close the pipe to a daemon PMDA or dlclose(3) a DSO PMDA. dbpmda does not\n"
        "exit, allowing another PMDA to be opened.\n",
    ),
    "debug": (
        "debug all | none\ndebug [-]flag [ [-]flag ... ] (- prefix to clear)",
        "Specify which debugging options should be active (see pmdbg(1)).  Options\n"
        "may be specified by name (or number for the old bit-field options), with\n"
        "multiple options separated by white space.  All options may be selected or\n"
        "deselected if 'all' or 'none' is specified.  The current setting is\n"
        "displayed by the status command.\n\n",
    ),
    "desc": (
        "desc metric",
        "Print out the meta data description for the 'metric'.  The metric may be\n"
        "specified by name, or as a PMID of the form N, N.N or N.N.N.\n",
    ),
    "fetch": (
        "fetch metric [ metric ... ]",
        "Fetch metrics from the PMDA.  The metrics may be specified as a list of\n"
        "metric names, or PMIDs of the form N, N.N or N.N.N.\n",
    ),
    "getdesc": (
        "getdesc on | off",
        "Before doing a fetch, get the descriptor so that the result of a fetch\ncan be printed out correctly.\n",
    ),
    "getiname": (
        "getiname on | off",
        "After a fetch if the metric has an associated instance domain then lookup\n"
        "the external names of any instances returned, rather than reporting the\n"
        "instance name as ???.\n",
    ),
    "instance": (
        'instance indom# [ number | name | "name" ]',
        "List the instances in 'indom'.  The list may be restricted to a specific\ninstance 'name' or 'number'.\n",
    ),
    "label": (
        "label context\nlabel domain\nlabel indom indom#\nlabel cluster cluster#\nlabel item metric\n"
        "label instances indom#",
        "",
    ),
    "name": (
        "name pmid#",
        "Print the name of the metric with PMID pmid#.  The pmid# syntax follows\n"
        "the source PMNS syntax, namely 3 numbers separated by '.' to encode\n"
        "the domain, cluster and item components of the PMID, e.g.\n"
        "    name 29.0.1004\n"
        "Most useful for PMDAs that support dynamic metrics in the PMNS.\n",
    ),
    "namespace": (
        "namespace fname",
        "Unload the current Name Space and load up the given Name Space.\n"
        "If unsuccessful then will try to reload the previous Name Space.\n",
    ),
    "open": (
        "open dso dsoname init_routine [ domain# ]\nopen pipe execname [ arg ... ]\n"
        "open socket unix sockname\nopen socket inet port#|service\nopen socket ipv6 port#|service",
        "Open a PMDA as either a DSO, via a network socket (unix/inet/ipv6), or as a\n"
        "daemon (connected with a pipe).  The 'dsoname' and 'execname' fields are\n"
        "the path to the PMDA shared object file or executable.  The first socket PMDA\n"
        "field is the type - either unix (if supported), inet or ipv6.  The 'sockname'\n"
        "argument for unix sockets is a path of a named pipe where a PMDA is listening\n"
        "for connections.  The 'port' argument is a port number, 'serv' a service name\n"
        "typically defined in /etc/services (resolved to a port via getservent(3)).\n"
        "The arguments to this command are similar to a line in the pmcd.conf file.\n",
    ),
    "pmid": (
        "pmid metric-name",
        "Print the PMID for the named metric\nMost useful for PMDAs that support dynamic metrics in the PMNS.\n",
    ),
    "profile": (
        "profile indom# [ all | none ]\nprofile indom# [ add | delete ] number",
        "For the instance domain specified, the profile may be changed to include\n"
        "'all' instances, no instances, add an instance or delete an instance.\n",
    ),
    "quit": ("quit", "Exit dbpmda.  This also closes any open PMDAs.\n"),
    "status": (
        "status",
        "Display the state of dbpmda, including which PMDA is connected, which\n"
        "debug options are set, and the current profile.\n",
    ),
    "store": (
        'store metric "value"',
        "Store the value (int, real or string) into the 'metric'.  The metric may be\n"
        "specified by name or as a PMID with the format N, N.N, N.N.N.  The value to\n"
        "be stored must be enclosed in quotes.  Unlike the other commands, a store\n"
        "must request a metric description and fetch the metric to determine how to\n"
        "interpret the value, and to allocate the PDU for transmitting the value,\n"
        "respectively.  The current profile will be used.\n",
    ),
    "text": (
        "text metric\ntext indom indom#",
        "Retrieve the help text for the 'metric' or 'indom' from the PMDA.  The one\n"
        "line message is shown between '[' and ']' with the long message on the next\n"
        "line.  To get the help text for an instance domain requires the word\n"
        "``indom'' before the indom number\n",
    ),
    "timer": ("timer on | off", "Report the response time of the PMDA when sending and receiving PDUs.\n"),
    "traverse": (
        "traverse metric-name",
        "Fetch and print all of the decendent metric names below metric-name\n"
        "in the PMNS.\n"
        "Most useful for PMDAs that support dynamic metrics in the PMNS.\n",
    ),
    "wait": ("wait seconds", "Sleep for this number of seconds\n"),
    "watch": (
        "watch logfilename",
        "An xterm window is opened which tails the specified log file.  This window\n"
        "must be closed by the user when no longer required.\n",
    ),
}
# the order of "help" with no command
HELP_ORDER = (
    "attr",
    "children",
    "close",
    "debug",
    "desc",
    "fetch",
    "getdesc",
    "getiname",
    "instance",
    "label",
    "name",
    "namespace",
    "open",
    "pmid",
    "profile",
    "quit",
    "status",
    "store",
    "text",
    "timer",
    "traverse",
    "wait",
    "watch",
)
# libpcp's debug options (pmdbg -l, PCP 6.0.3) in the order "status" lists them
DEBUG_FLAGS = (
    "pdu",
    "fetch",
    "profile",
    "value",
    "context",
    "indom",
    "pdubuf",
    "log",
    "logmeta",
    "optfetch",
    "af",
    "appl0",
    "appl1",
    "appl2",
    "pmns",
    "libpmda",
    "timecontrol",
    "pmc",
    "derive",
    "lock",
    "interp",
    "config",
    "pmapi",
    "fault",
    "auth",
    "discovery",
    "attr",
    "http",
    "desperate",
    "deprecated",
    "exec",
    "labels",
    "series",
    "libweb",
    "alloc",
    "services",
    "appl3",
    "appl4",
    "appl5",
    "access",
    "qa",
    "search",
    "query",
    "compress",
    "dev0",
    "dev1",
    "dev2",
    "pmlc",
    "appl6",
    "appl7",
    "appl8",
    "appl9",
    "tls",
)
# pmSetDebug("N"): the old bit-field options
DEBUG_BITS = {**dict(enumerate(DEBUG_FLAGS[:28])), 30: "desperate"}

_TYPE_NAMES: dict[int, str] = {
    PmType.I32: "32-bit int",
    PmType.U32: "32-bit unsigned int",
    PmType.I64: "64-bit int",
    PmType.U64: "64-bit unsigned int",
    PmType.FLOAT: "float",
    PmType.DOUBLE: "double",
    PmType.STRING: "string",
    PmType.AGGREGATE: "aggregate",
    PmType.AGGREGATE_STATIC: "static aggregate",
    PmType.EVENT: "event record array",
    PmType.HIGHRES_EVENT: "highres event record array",
}
TYPE_STR = {  # pmTypeStr
    -1: "NO_SUPPORT",
    0: "32",
    1: "U32",
    2: "64",
    3: "U64",
    4: "FLOAT",
    5: "DOUBLE",
    6: "STRING",
    7: "AGGREGATE",
    8: "AGGREGATE_STATIC",
    9: "EVENT",
    10: "HIGHRES_EVENT",
    255: "UNKNOWN",
}
_SEM = {1: "counter", 3: "instant", 4: "discrete"}


def format_units(u: PmUnits) -> str:
    """libpcp's ``pmUnitsStr`` (6.0.3: no extra units)."""
    space = time_ = count = ""
    if u.dim_space:
        space = (
            ["byte", "Kbyte", "Mbyte", "Gbyte", "Tbyte", "Pbyte", "Ebyte", "Zbyte", "Ybyte"][u.scale_space]
            if 0 <= u.scale_space <= 8
            else f"space-{u.scale_space}"
        )
    if u.dim_time:
        time_ = (
            ["nanosec", "microsec", "millisec", "sec", "min", "hour"][u.scale_time]
            if 0 <= u.scale_time <= 5
            else f"time-{u.scale_time}"
        )
    if u.dim_count:
        count = (
            "count" if u.scale_count == 0 else ("count x 10" if u.scale_count == 1 else f"count x 10^{u.scale_count}")
        )
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


def time_of(sec: int) -> str:
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

        def stamp(r: EventRecord) -> str:
            frac = f"{r.subsec:09d}" if arr.highres else f"{r.subsec // 1000:03d}"
            return f"{time_of(r.sec)}.{frac}"

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


def desc_lines(d: PmDesc) -> list[str]:
    if d.type == PmType.NOSUPPORT:
        return ["    Data Type: Not Supported"]
    tname = _TYPE_NAMES.get(d.type, "???")
    line = f"    Data Type: {tname}" + (f" ({d.type})" if tname == "???" else "")
    line += f"  InDom: {indom_str(d.indom)} 0x{d.indom:x}"
    sem = _SEM.get(d.sem, "???")
    units = format_units(d.units) or "none"
    return [line, f"    Semantics: {sem}" + (f" ({d.sem})" if sem == "???" else "") + f"  Units: {units}"]
