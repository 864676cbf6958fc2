"""dbpmda's grammar (PCP ``src/dbpmda/src/gram.y``), one production at a time.

The parser reads tokens as bison does: a lookahead only where the state
needs one (after a token that ends a ``metric``, ``indom``, ``flag`` ... the
reduction, and its action, happen before the next token is read).  So a
syntax error is found, and the caret placed, at the same character as in
dbpmda, and the actions that run while parsing (name lookups, warnings,
profile changes, debug flags, ``doargs``) run in the same order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pmda_py.testing.dbpmda.lexer import Lexer, Token

__all__ = ["ParseError", "Parser", "Semantics", "Stmt"]

_METRIC = frozenset(("NUMBER", "NUMBER2D", "NUMBER3D", "NAME"))
_INDOM = frozenset(("NUMBER", "NEGNUMBER", "NUMBER2D"))
_FNAME = frozenset(("NAME", "PATHNAME"))
_FLAG = {
    "NAME": None,
    "NEGNAME": None,
    "FETCH": "fetch",
    "PROFILE": "profile",
    "CTXT": "context",
    "INDOM": "indom",
    "ATTR": "attr",
}
# HELP x: the commands "help" knows, by token
_HELP_TOKENS = {
    "ATTR": "attr",
    "CLOSE": "close",
    "DBG": "debug",
    "DESC": "desc",
    "FETCH": "fetch",
    "GETDESC": "getdesc",
    "GETINAME": "getiname",
    "INFO": "text",
    "INSTANCE": "instance",
    "LABEL": "label",
    "NAMESPACE": "namespace",
    "OPEN": "open",
    "PMNS_CHILDREN": "children",
    "PMNS_NAME": "name",
    "PMNS_PMID": "pmid",
    "PMNS_TRAVERSE": "traverse",
    "PROFILE": "profile",
    "QUIT": "quit",
    "STATUS": "status",
    "STORE": "store",
    "TIMER": "timer",
    "WAIT": "wait",
    "WATCH": "watch",
}
# commands whose bare form prints their usage (CMD EOL -> HELP_USAGE), by token
_USAGE = {k: v for k, v in _HELP_TOKENS.items() if k not in ("CLOSE", "NAMESPACE", "QUIT", "STATUS")}


class ParseError(Exception):
    """yyerror(message) in a production (the message is printed as is)."""


class Semantics(Protocol):
    """What the grammar's actions ask of the session."""

    def warn(self, message: str) -> None: ...

    async def metric_by_name(self, name: str) -> int: ...

    def metric_by_number(self, pmid: int) -> int: ...

    def profile_change(self, indom: int, add: bool, insts: list[int]) -> None: ...

    def debug_flag(self, flag: str) -> bool: ...

    def debug_all(self, on: bool) -> None: ...

    def attribute_code(self, key: int | str) -> int: ...

    def service_port(self, name: str) -> int: ...


@dataclass
class Stmt:
    """One accepted statement: gram.y's ``stmt_type`` and ``param``."""

    kind: str  # OPEN CLOSE DESC FETCH STORE INFO INSTANCE LABEL HELP ... EOL EOF
    number: int = 0
    pmid: int = 0
    indom: int = 0
    name: str | None = None
    pmids: list[int] = field(default_factory=list)
    full: bool = False  # HELP: full text, not the usage
    help_of: str | None = None
    open_kind: str = ""  # dso pipe unix inet ipv6
    args: list[str] = field(default_factory=list)
    port: int = 0
    flag: bool = False  # TIMER GETDESC GETINAME on/off
    seconds: int = 0


def pmid_of(domain: int, cluster: int, item: int) -> int:
    """__pmID_int's bit-fields: 9 bits of domain, 12 of cluster, 10 of item."""
    return ((domain & 0x1FF) << 22) | ((cluster & 0xFFF) << 10) | (item & 0x3FF)


def indom_of(domain: int, serial: int) -> int:
    return ((domain & 0x1FF) << 22) | (serial & 0x3FFFFF)


class Parser:
    """Reads statements from a :class:`Lexer`; errors go to ``error``
    (dbpmda's yyerror, which also skips the rest of the line)."""

    def __init__(self, lexer: Lexer, sem: Semantics, error: Callable[[str], None]) -> None:
        self.lexer, self.sem = lexer, sem
        self._error = error
        self._la: Token | None = None

    def _yyerror(self, message: str) -> None:
        self._error(message)

    def _read(self) -> Token:
        if self._la is None:
            self._la = self.lexer.next_token(self._yyerror)
        tok, self._la = self._la, None
        return tok

    def _expect(self, *kinds: str) -> Token:
        tok = self._read()
        if tok.kind not in kinds:
            raise ParseError("syntax error")
        return tok

    async def statement(self) -> Stmt:
        """yyparse(): one statement, or EOL after an error."""
        self._la = None
        try:
            return await self._stmt()
        except ParseError as err:
            self._yyerror(str(err))
            return Stmt("EOL")

    async def _stmt(self) -> Stmt:
        t = self._read()
        k = t.kind
        if k == "EOF":
            return Stmt("EOF")
        if k == "EOL":
            return Stmt("EOL")
        handler = _STATEMENTS.get(k)
        if handler is None:
            if self.lexer.at_eof():
                return Stmt("EOF")
            raise ParseError("Unrecognized command")
        return await handler(self)

    # -- the productions, by first token
    async def _open(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="open")
        if t.kind == "DSO":
            fname = self._fname(self._expect(*_FNAME))
            init = self._expect("NAME")
            t = self._read()
            domain = 0
            if t.kind == "NUMBER":
                domain = t.num
                t = self._read()
            if t.kind != "EOL":
                raise ParseError("syntax error")
            return Stmt("OPEN", open_kind="dso", name=fname, args=[init.string], number=domain)
        if t.kind == "PIPE":
            fname = self._fname(self._expect(*_FNAME))
            return Stmt("OPEN", open_kind="pipe", name=fname, args=self._doargs())
        if t.kind == "SOCK":
            t = self._read()
            if t.kind in _FNAME:
                return Stmt("OPEN", open_kind="unix", name=self._fname(t))
            if t.kind == "UNIX":
                return Stmt("OPEN", open_kind="unix", name=self._fname(self._expect(*_FNAME)))
            if t.kind in ("INET", "IPV6"):
                p = self._expect("NUMBER", "STRING")
                port = p.num if p.kind == "NUMBER" else self.sem.service_port(p.string)
                return Stmt("OPEN", open_kind=t.kind.lower(), port=port)
        raise ParseError("syntax error")

    @staticmethod
    def _fname(t: Token) -> str:
        text = t.string
        if t.kind == "PATHNAME" or text.startswith("/") or (len(text) > 4 and text[1] == ":" and text[2] == "/"):
            return text
        return "./" + text

    def _doargs(self) -> list[str]:
        """lex.l doargs(): the rest of the line, read beneath the scanner."""
        if self.lexer.lastc == "\n":
            return []
        args: list[str] = []
        cur = ""
        delim = ""
        while True:
            c = self.lexer.read_raw()
            if delim:
                if c == delim:
                    delim = ""
                    continue
            elif c in (" ", "\t", "\n", ""):
                if cur:
                    args.append(cur[:255])
                    cur = ""
                if c in ("\n", ""):
                    return args
                continue
            elif c in ('"', "'"):
                delim = c
                continue
            if c == "":
                return args
            cur += c

    async def _metric(self, t: Token) -> int:
        if t.kind == "NAME":
            return await self.sem.metric_by_name(t.string)
        if t.kind == "NUMBER":
            return self.sem.metric_by_number(t.num & 0xFFFFFFFF)
        if t.kind == "NUMBER2D":
            c, i = t.nums
            return self.sem.metric_by_number(pmid_of(0, c, i))
        d, c, i = t.nums
        return self.sem.metric_by_number(pmid_of(d, c, i))

    @staticmethod
    def _indom(t: Token) -> int:
        if t.kind == "NUMBER2D":
            return indom_of(*t.nums)
        return t.num & 0xFFFFFFFF

    async def _simple(self, kind: str) -> Stmt:
        t = self._read()
        if t.kind == "EOL" and kind in _USAGE:
            return Stmt("HELP", help_of=_USAGE[kind])
        if t.kind != "EOL":
            raise ParseError("syntax error")
        return Stmt(kind)

    async def _close(self) -> Stmt:
        return await self._simple("CLOSE")

    async def _quit(self) -> Stmt:
        return await self._simple("QUIT")

    async def _status(self) -> Stmt:
        return await self._simple("STATUS")

    async def _desc(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="desc")
        if t.kind not in _METRIC:
            raise ParseError("syntax error")
        p = await self._metric(t)
        self._expect("EOL")
        return Stmt("DESC", pmid=p)

    async def _fetch(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="fetch")
        if t.kind not in _METRIC:
            raise ParseError("syntax error")
        pmids = [await self._metric(t)]
        while True:
            t = self._read()
            if t.kind == "EOL":
                return Stmt("FETCH", pmids=pmids)
            if t.kind == "COMMA":
                t = self._read()
            if t.kind not in _METRIC:
                raise ParseError("syntax error")
            pmids.append(await self._metric(t))

    async def _store(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="store")
        if t.kind not in _METRIC:
            raise ParseError("syntax error")
        p = await self._metric(t)
        value = self._expect("STRING")
        self._expect("EOL")
        return Stmt("STORE", pmid=p, name=value.string)

    async def _info(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="text")
        if t.kind == "INDOM":
            ind = self._indom(self._expect(*_INDOM))
            self._expect("EOL")
            return Stmt("INFO", indom=ind, number=2)  # PM_TEXT_INDOM
        if t.kind not in _METRIC:
            raise ParseError("syntax error")
        p = await self._metric(t)
        self._expect("EOL")
        return Stmt("INFO", pmid=p, number=1)  # PM_TEXT_PMID

    async def _instance(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="instance")
        if t.kind not in _INDOM:
            raise ParseError("syntax error")
        ind = self._indom(t)
        t = self._read()
        if t.kind == "EOL":
            return Stmt("INSTANCE", indom=ind, number=-1)
        if t.kind == "NUMBER":
            self._expect("EOL")
            return Stmt("INSTANCE", indom=ind, number=t.num)
        if t.kind in ("STRING", "NAME"):
            self._expect("EOL")
            return Stmt("INSTANCE", indom=ind, number=-1, name=t.string)
        raise ParseError("syntax error")

    async def _profile(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="profile")
        if t.kind not in _INDOM:
            raise ParseError("syntax error")
        ind = self._indom(t)
        t = self._read()
        if t.kind in ("ALL", "NONE"):
            self._expect("EOL")
            self.sem.profile_change(ind, t.kind == "ALL", [])
            return Stmt("EOL")
        if t.kind in ("ADD", "DEL"):
            n = self._expect("NUMBER")
            self._expect("EOL")
            self.sem.profile_change(ind, t.kind == "ADD", [n.num])
            return Stmt("EOL")
        raise ParseError("syntax error")

    async def _watch(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="watch")
        if t.kind not in _FNAME:
            raise ParseError("syntax error")
        self._expect("EOL")
        return Stmt("WATCH", name=self._fname(t))

    async def _name(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="name")
        if t.kind != "NUMBER3D":
            raise ParseError("syntax error")
        self._expect("EOL")
        return Stmt("PMNS_NAME", pmid=pmid_of(*t.nums))

    async def _pmns_named(self, kind: str, help_of: str) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of=help_of)
        if t.kind != "NAME":
            raise ParseError("syntax error")
        self._expect("EOL")
        return Stmt(kind, name=t.string)

    async def _pmid(self) -> Stmt:
        return await self._pmns_named("PMNS_PMID", "pmid")

    async def _children(self) -> Stmt:
        return await self._pmns_named("PMNS_CHILDREN", "children")

    async def _traverse(self) -> Stmt:
        return await self._pmns_named("PMNS_TRAVERSE", "traverse")

    async def _namespace(self) -> Stmt:
        t = self._expect(*_FNAME)
        self._expect("EOL")
        return Stmt("NAMESPACE", name=self._fname(t))

    async def _attr(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="attr")
        if t.kind not in ("NUMBER", "STRING"):
            raise ParseError("syntax error")
        code = self.sem.attribute_code(t.num if t.kind == "NUMBER" else t.string)
        t = self._read()
        if t.kind == "EOL":
            return Stmt("ATTR", number=code)
        if t.kind == "STRING":
            self._expect("EOL")
            return Stmt("ATTR", number=code, name=t.string)
        raise ParseError("syntax error")

    async def _label(self) -> Stmt:
        t = self._read()
        k = t.kind
        if k == "EOL":
            return Stmt("HELP", help_of="label")
        if k in ("CTXT", "DOMAIN"):
            self._expect("EOL")
            return Stmt("LABEL", number=1 if k == "CTXT" else 2)
        if k in ("INDOM", "INSTANCES"):
            ind = self._indom(self._expect(*_INDOM))
            self._expect("EOL")
            return Stmt("LABEL", number=4 if k == "INDOM" else 32, indom=ind)
        if k == "CLUSTER":
            c = self._expect("NUMBER", "NUMBER2D")
            p = pmid_of(c.nums[0], c.nums[1], 0) if c.kind == "NUMBER2D" else c.num & 0xFFFFFFFF
            self._expect("EOL")
            return Stmt("LABEL", number=8, pmid=p)
        if k == "ITEM":
            t = self._read()
            if t.kind not in _METRIC:
                raise ParseError("syntax error")
            p = await self._metric(t)
            self._expect("EOL")
            return Stmt("LABEL", number=16, pmid=p)
        raise ParseError("syntax error")

    async def _help(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", full=True)
        if t.kind not in _HELP_TOKENS:
            raise ParseError("syntax error")
        self._expect("EOL")
        return Stmt("HELP", full=True, help_of=_HELP_TOKENS[t.kind])

    def _flag(self, t: Token) -> None:
        flag = t.string if _FLAG[t.kind] is None else str(_FLAG[t.kind])
        if not self.sem.debug_flag(flag):
            raise ParseError(f"Bad debug flag ({flag})")

    def _debug_number(self, t: Token) -> None:
        if not self.sem.debug_flag(str(t.num)):
            raise ParseError(f"Bad debug flag ({t.num})")

    async def _debug(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="debug")
        if t.kind in ("ALL", "NONE"):
            self._expect("EOL")
            self.sem.debug_all(t.kind == "ALL")
            return Stmt("DBG")
        first = True
        while True:
            if not first:
                t = self._read()
                if t.kind == "EOL":
                    return Stmt("DBG")
                if t.kind == "COMMA":
                    t = self._read()
            first = False
            if t.kind == "NUMBER":
                self._debug_number(t)
            elif t.kind in _FLAG:
                self._flag(t)
            else:
                raise ParseError("syntax error")

    async def _switch(self, kind: str) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of=_USAGE[kind])
        if t.kind not in ("ON", "OFF"):
            raise ParseError("syntax error")
        self._expect("EOL")
        return Stmt(kind, flag=t.kind == "ON")

    async def _timer(self) -> Stmt:
        return await self._switch("TIMER")

    async def _getdesc(self) -> Stmt:
        return await self._switch("GETDESC")

    async def _getiname(self) -> Stmt:
        return await self._switch("GETINAME")

    async def _wait(self) -> Stmt:
        t = self._read()
        if t.kind == "EOL":
            return Stmt("HELP", help_of="wait")
        if t.kind != "NUMBER":
            raise ParseError("syntax error")
        self._expect("EOL")
        return Stmt("WAIT", seconds=t.num & 0xFFFFFFFF)


# the first token of each statement and the production it starts
_STATEMENTS = {
    "OPEN": Parser._open,
    "CLOSE": Parser._close,
    "DESC": Parser._desc,
    "FETCH": Parser._fetch,
    "STORE": Parser._store,
    "INFO": Parser._info,
    "INSTANCE": Parser._instance,
    "PROFILE": Parser._profile,
    "WATCH": Parser._watch,
    "PMNS_NAME": Parser._name,
    "PMNS_PMID": Parser._pmid,
    "PMNS_CHILDREN": Parser._children,
    "PMNS_TRAVERSE": Parser._traverse,
    "NAMESPACE": Parser._namespace,
    "ATTR": Parser._attr,
    "LABEL": Parser._label,
    "HELP": Parser._help,
    "QUIT": Parser._quit,
    "DBG": Parser._debug,
    "STATUS": Parser._status,
    "TIMER": Parser._timer,
    "GETDESC": Parser._getdesc,
    "GETINAME": Parser._getiname,
    "WAIT": Parser._wait,
}
