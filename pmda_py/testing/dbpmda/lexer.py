"""dbpmda's scanner (PCP ``src/dbpmda/src/lex.l``), flex's behaviour included.

The scanner reads its input one character at a time, as dbpmda's
``dbpmdaFlexInput`` feeds flex: it keeps the characters flex has read but not
yet used (its buffer), the current input line as read so far (``linepos``,
where the caret of an error goes), and the start condition (``FNAME`` after
``dso``, ``namespace``, ``pipe``, ``socket``, ``watch``, until a ``PATHNAME``
is returned).  Each token is the longest match of lex.l's rules (the earlier
rule on a tie), and flex reads one character past a token whenever its
automaton could still go on, so that is how far ``linepos`` gets.

Numbers are converted as the C code does: ``atoi`` and ``sscanf("%d")`` (a
``strtol`` cast to ``int``), ``0x`` numbers with ``strtol(.., 16)``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pmda_py.testing.dbpmda.cvalues import c_atoi, c_strtol, to_int

__all__ = ["KEYWORDS", "Lexer", "Token"]

# lex.l's reserved words, in its order, with the token each returns
KEYWORDS: dict[str, str] = {
    "add": "ADD",
    "all": "ALL",
    "attr": "ATTR",
    "attribute": "ATTR",
    "children": "PMNS_CHILDREN",
    "close": "CLOSE",
    "cluster": "CLUSTER",
    "context": "CTXT",
    "debug": "DBG",
    "delete": "DEL",
    "desc": "DESC",
    "domain": "DOMAIN",
    "dso": "DSO",
    "exit": "QUIT",
    "fetch": "FETCH",
    "getiname": "GETINAME",
    "getdesc": "GETDESC",
    "help": "HELP",
    "indom": "INDOM",
    "inet": "INET",
    "instance": "INSTANCE",
    "instances": "INSTANCES",
    "ipv6": "IPV6",
    "item": "ITEM",
    "label": "LABEL",
    "name": "PMNS_NAME",
    "namespace": "NAMESPACE",
    "none": "NONE",
    "off": "OFF",
    "on": "ON",
    "open": "OPEN",
    "pipe": "PIPE",
    "pmid": "PMNS_PMID",
    "profile": "PROFILE",
    "q": "QUIT",
    "quit": "QUIT",
    "socket": "SOCK",
    "status": "STATUS",
    "store": "STORE",
    "text": "INFO",
    "timer": "TIMER",
    "traverse": "PMNS_TRAVERSE",
    "unix": "UNIX",
    "wait": "WAIT",
    "watch": "WATCH",
}
# the words after which lex.l does BEGIN FNAME
_TO_FNAME = frozenset(("dso", "namespace", "pipe", "socket", "watch"))

_NAME_CHARS = r"A-Za-z0-9_./:-"
# the rules after the keywords, in lex.l's order: (action, full pattern)
_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("HELP", re.compile(r"\?")),
    ("EQUAL", re.compile(r"=")),
    ("COMMA", re.compile(r",")),
    ("PLUS", re.compile(r"\+")),
    ("NAME", re.compile(rf"[A-Za-z][{_NAME_CHARS}]*")),
    ("NEGNAME", re.compile(rf"-[A-Za-z][{_NAME_CHARS}]*")),
    ("MACRO", re.compile(r"\$[A-Za-z][A-Za-z0-9_-]*")),
    ("HEX", re.compile(r"0[xX][0-9]+")),
    ("NUMBER", re.compile(r"[0-9]+")),
    ("NEGNUMBER", re.compile(r"-[0-9]+")),
    ("NUMBER2D", re.compile(r"[0-9]+\.[0-9]+")),
    ("NUMBER3D", re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")),
    ("STRING", re.compile(r'"[^"\n][^"\n]*"')),
    ("EXPECTED_DQ", re.compile(r'"[^"\n][^"\n]*\n')),
    ("STRING", re.compile(r"'[^'\n][^'\n]*'")),
    ("EXPECTED_SQ", re.compile(r"'[^'\n][^'\n]*\n")),
    ("COMMENT", re.compile(r"#.*\n")),
    ("SPACE", re.compile(r"[\r\t ]+")),
    ("EOL", re.compile(r"\n")),
    ("PATHNAME", re.compile(r"[^\t \n]+")),  # <FNAME> only
    ("ILLEGAL", re.compile(r".")),
]
# flex's automaton: the prefixes each rule can still extend (``open``) and
# those it cannot go on from (``closed``); a rule absent from closed never ends
_PREFIX: list[tuple[re.Pattern[str], re.Pattern[str] | None, bool]] = [
    # (viable prefixes, closed prefixes, FNAME only)
    (re.compile(rf"[A-Za-z][{_NAME_CHARS}]*"), None, False),
    (re.compile(rf"-(?:[A-Za-z][{_NAME_CHARS}]*|[0-9]+)?"), None, False),
    (re.compile(r"\$(?:[A-Za-z][A-Za-z0-9_-]*)?"), None, False),
    (re.compile(r"0(?:[xX][0-9]*)?"), None, False),
    (re.compile(r"[0-9]+(?:\.(?:[0-9]+(?:\.[0-9]*)?)?)?"), None, False),
    (re.compile(r'"(?:[^"\n]+["\n]?)?'), re.compile(r'"[^"\n]+["\n]'), False),
    (re.compile(r"'(?:[^'\n]+['\n]?)?"), re.compile(r"'[^'\n]+['\n]"), False),
    (re.compile(r"#[^\n]*\n?"), re.compile(r"#[^\n]*\n"), False),
    (re.compile(r"[\r\t ]+"), None, False),
    (re.compile(r"\n"), re.compile(r"\n"), False),
    (re.compile(r"[^\n]"), re.compile(r"[^\n]"), False),  # ? = , + and "."
    (re.compile(r"[^\t \n]+"), None, True),
]


@dataclass
class Token:
    kind: str  # gram.y's token name, or EOF
    text: str
    string: str = ""  # NAME, PATHNAME, STRING (unquoted) ...
    num: int = 0  # NUMBER, NEGNUMBER
    nums: tuple[int, ...] = ()  # NUMBER2D, NUMBER3D


@dataclass
class Lexer:
    """The scanner over one input (a script, or lines given one by one)."""

    source: Iterator[str]
    #: called with each character read (dbpmda -e echoes as it reads)
    echo: Callable[[str], None] | None = None
    #: called when a new line starts (the -i prompt)
    on_newline: Callable[[], None] | None = None
    buf: str = ""  # read by flex, not yet used
    line: str = ""  # the current input line as read so far
    lastc: str = "\n"  # "" once the input is exhausted
    fname: bool = False  # start condition FNAME
    _pending: str = field(default="", repr=False)

    # -- dbpmdaFlexInput
    def getc(self) -> str:
        """One character from the input, "" at the end (a NUL ends it too)."""
        if self.lastc == "":
            return ""
        if self.lastc == "\n":
            self.line = ""
            if self.on_newline is not None:
                self.on_newline()
        while True:
            if not self._pending:
                try:
                    self._pending = next(self.source)
                except StopIteration:
                    self.lastc = ""
                    return ""
                if not self._pending:
                    continue
            c, self._pending = self._pending[0], self._pending[1:]
            if c == "\r":
                continue
            break
        if c == "\0":
            self.lastc = ""
            return ""
        if self.echo is not None:
            self.echo(c)
        self.line += c
        self.lastc = c
        return c

    @property
    def linepos(self) -> int:
        return len(self.line)

    def skip_line(self) -> None:
        """yyerror: read (past flex) to the end of the line."""
        c = self.lastc
        while c not in ("", "\n"):
            c = self.getc()

    def at_eof(self) -> bool:
        """yywrap()."""
        return self.lastc == ""

    def read_raw(self) -> str:
        """A character read past flex (doargs)."""
        return self.getc()

    # -- the automaton
    def _can_go_on(self, s: str) -> bool:
        for prefix, closed, fname_only in _PREFIX:
            if fname_only and not self.fname:
                continue
            if prefix.fullmatch(s) and (closed is None or not closed.fullmatch(s)):
                return True
        return False

    def _viable(self, s: str) -> bool:
        return any(p.fullmatch(s) and (self.fname or not f) for p, _c, f in _PREFIX)

    def _walk(self) -> str:
        """Read as flex does for the next token; returns the text walked."""
        k = 0
        while True:
            if k > 0 and not self._can_go_on(self.buf[:k]):
                break
            if k >= len(self.buf):
                c = self.getc()
                if not c:
                    break
                self.buf += c
            if self._viable(self.buf[: k + 1]):
                k += 1
            else:
                break
        return self.buf[:k]

    def _match(self, walked: str) -> tuple[str, str]:
        best_len, best_kind = 0, ""
        m = _RULES[4][1].match(walked)  # keywords are NAMEs a reserved word
        if m and m.group(0) in KEYWORDS:
            best_len, best_kind = len(m.group(0)), "KEYWORD"
        for kind, pattern in _RULES:
            if kind == "PATHNAME" and not self.fname:
                continue
            m = pattern.match(walked)
            if m and len(m.group(0)) > best_len:
                best_len, best_kind = len(m.group(0)), kind
        return walked[:best_len], best_kind

    def next_token(self, error: Callable[[str], None]) -> Token:
        """The next token for the parser; scanner errors go to ``error``
        (yyerror), and scanning goes on after them, as in flex."""
        while True:
            walked = self._walk()
            if not walked:
                return Token("EOF", "")
            text, kind = self._match(walked)
            self.buf = self.buf[len(text) :]
            if kind == "KEYWORD":
                if text in _TO_FNAME:
                    self.fname = True
                return Token(KEYWORDS[text], text)
            if kind in ("SPACE",):
                continue
            if kind in ("COMMENT", "EOL"):
                return Token("EOL", text)
            if kind in ("EXPECTED_DQ", "EXPECTED_SQ"):
                error('Expected "' if kind == "EXPECTED_DQ" else "Expected '")
                continue
            if kind == "ILLEGAL":
                error("Illegal character")
                continue
            if kind == "STRING":
                return Token("STRING", text, text[1:-1])
            if kind == "PATHNAME":
                self.fname = False
                return Token("PATHNAME", text, text)
            if kind == "HEX":
                return Token("NUMBER", text, num=to_int(c_strtol(text[2:], 16)[0]))
            if kind in ("NUMBER", "NEGNUMBER"):
                return Token(kind, text, num=c_atoi(text))
            if kind in ("NUMBER2D", "NUMBER3D"):
                return Token(kind, text, nums=tuple(c_atoi(x) for x in text.split(".")))
            return Token(kind, text, text)  # NAME NEGNAME MACRO HELP EQUAL COMMA PLUS
