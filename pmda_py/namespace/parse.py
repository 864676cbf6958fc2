"""libpcp's PMNS loader over pmcpp's output, and the file readers."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Optional

import attrs

from pmda_py.namespace.base import NAME, PmnsError, Resolver, is_dynamic_root
from pmda_py.namespace.cpp import preprocess
from pmda_py.namespace.tree import Namespace, Node
from pmda_py.pmapi import DYNAMIC_PMID, pmid, pmid_cluster, pmid_domain, pmid_item

__all__ = ["load", "loads", "parse"]

_NAME = NAME
_PATH = re.compile(r"[A-Za-z][A-Za-z0-9_.]*")
#: libpcp's ``sscanf(line, "# %d \"%s")`` of a line control line
_MARK = re.compile(r"#\s*([-+]?\d+)\s*\"(\S+)")
_TOKEN = re.compile(r"[^ \t\n\r\f\v]+")


_SPACE = " \t\n\r\f\v"


def _libpcp_line(text: str) -> str:
    """A line as libpcp's PMNS scanner keeps it (``linebuf``): leading white
    space dropped, each run of it cut to its first character, none beside
    a colon; the newline kept where it begins the line's last run."""
    out: list[str] = []
    inspace = False
    for ch in text + "\n":
        if ch in _SPACE:
            if not inspace:
                if out and out[-1] != ":":
                    out.append(ch)
                inspace = True
        elif ch == ":":
            if inspace:
                inspace = False
                if not out:  # white space first: libpcp writes this colon before its buffer, lost
                    continue
                out.pop()
            out.append(ch)
        else:
            out.append(ch)
            inspace = False
    return "".join(out)


class _ErrText:
    """libpcp's ``err()`` output for one PMNS load, quirks and all: the line
    buffer it prints is the one it overwrote with its caret line or with a
    message before, so a second error shows the first one's remains."""

    def __init__(self) -> None:
        self.buf = ""  #: linebuf, as a C array (a NUL ends what is printed)
        self.linep = -1  #: where the last token began in it (-1: none yet)
        self.lineno = -1
        self.fname = ""
        self.out: list[str] = []

    def line(self, fname: str, lineno: int, buf: str) -> None:
        self.fname, self.lineno, self.buf = fname, lineno, buf

    def err(self, message: str) -> None:
        out = self.out
        if self.lineno > 0:
            out.append(f"[{self.fname}:{self.lineno}] ")
        out.append(f"Error Parsing ASCII PMNS: {message}\n")
        if self.lineno > 0:
            shown = self.buf.split("\0", 1)[0]
            out.append(f"    {shown}" + ("" if shown.endswith("\n") else "\n"))
            if self.linep >= 0:
                head = "".join(c if c in _SPACE else " " for c in self.buf[: self.linep].ljust(self.linep))
                self.buf = head + "^\n\0" + self.buf[self.linep + 3 :]
                out.append(f"    {head}^\n")

    def message(self, message: str) -> None:
        """err(linebuf) after the message was written into linebuf."""
        self.buf = message + "\0" + self.buf[len(message) + 1 :]
        self.err(message)

    def error(self, fname: str, line: int, reason: str) -> PmnsError:
        return PmnsError(fname, line, reason, printed="".join(self.out))


def _pmid_token(tok: str, fail: Callable[[str], PmnsError]) -> Optional[int]:
    """libpcp's PMID token: None when ``tok`` is not one (a BOGUS token)."""
    if tok.count(":") > 3 or any(not (c.isdigit() or c in ":*") for c in tok):
        return None
    m = re.match(r"(\d+):(\d+):(\d+)", tok)  # sscanf("%d:%d:%d") == 3
    if m:
        d, c, i = (int(x) for x in m.groups())
        if d > 510:
            raise fail("Illegal domain field in PMID")
        if c > 4095:
            raise fail("Illegal cluster field in PMID")
        if i > 1023:
            raise fail("Illegal item field in PMID")
        return pmid(d, c, i)
    colon = tok.find(":")
    if colon >= 0 and tok[colon + 1 :] != "*:*":
        raise fail("Illegal PMID")
    m = re.match(r"\d+", tok)
    if not m:
        raise fail("Illegal PMID")
    if int(m.group(0)) > 510:
        raise fail("Illegal domain field in dynamic PMID")
    return pmid(DYNAMIC_PMID, int(m.group(0)), 0)


@attrs.define
class _Block:
    path: str
    file: str
    line: int
    children: list[tuple[str, Optional[int]]] = attrs.field(factory=list)


def parse(lines: Iterable[tuple[str, int, str]], *, dupok: bool = True) -> Namespace:
    """Build a :class:`Namespace` from :func:`preprocess`'s lines, as
    libpcp's ``pmLoadASCIINameSpace(file, dupok)`` does (pminfo and dbpmda
    load ``-n`` files with ``dupok``; pmcd does not).

    Raises:
        PmnsError: what libpcp reports as "Error Parsing ASCII PMNS".
    """
    seen: list[_Block] = []  # the most recent block first, as libpcp's seen list
    state = 0
    last = ("<pmns>", 0)
    e = _ErrText()
    marked: Optional[tuple[str, str, int]] = None  # a "# N file" line's (our file, its file, line delta)
    for src_name, src_line, text in lines:
        norm = _libpcp_line(text)
        if marked is not None and marked[0] != src_name:
            marked = None  # pmcpp marks a change of file itself
        mark = _MARK.match(norm)
        if mark is not None:  # libpcp's line control: the lines after it are that file's, from that line
            marked = (src_name, mark.group(2)[:-1], int(mark.group(1)) - src_line - 1)
            continue
        fname, lineno = (marked[1], src_line + marked[2]) if marked is not None else (src_name, src_line)
        last = (fname, lineno)
        e.line(fname, lineno, norm)
        lexed: list[str] = []  # an error the scanner reported on this token

        def fail(reason: str, fname: str = fname, lineno: int = lineno, lexed: list[str] = lexed) -> PmnsError:
            e.err(reason)
            return e.error(fname, lineno, lexed[0] if lexed else reason)

        def lex_fail(reason: str, fname: str = fname, lineno: int = lineno, lexed: list[str] = lexed) -> PmnsError:
            e.err(reason)  # the scanner's error; the parser's for its BOGUS token follows
            lexed.append(reason)
            return PmnsError(fname, lineno, reason)

        if norm.startswith("#"):
            e.lineno -= 1  # libpcp counts this line only once it is not a "# N file" line
            raise fail("Illegal line number control number")
        for m in _TOKEN.finditer(norm):
            tok = m.group(0)
            e.linep = m.start()
            if tok == "{":
                kind = "{"
            elif tok == "}":
                kind = "}"
            elif _NAME.fullmatch(tok):
                kind = "NAME"
            elif _PATH.fullmatch(tok):
                kind = "PATH"
            else:
                try:
                    value = _pmid_token(tok, lex_fail)
                except PmnsError:
                    value = None
                kind = "BOGUS" if value is None else "PMID"
            if state == 0:
                if kind not in ("NAME", "PATH"):
                    raise fail("Expected NAME or PATH")
                seen.insert(0, _Block(tok, fname, lineno))
                state = 1
            elif state == 1:
                if kind != "{":
                    raise fail("{ expected")
                state = 2
            elif state == 2 or kind != "PMID":
                if kind == "NAME":
                    seen[0].children.append((tok, None))
                    state = 3
                elif kind == "}":
                    state = 0
                    names = [c for c, _ in seen[0].children]
                    dup = next((c for k, c in enumerate(names) if c in names[k + 1 :]), None)
                    if dup is not None:
                        reason = f'Duplicate name "{dup}" in subtree for "{seen[0].path}"'
                        e.message(reason + "\n")  # written into libpcp's line buffer, newline and all
                        raise e.error(fname, lineno, reason)
                else:
                    raise fail("Expected NAME or }" if state == 2 else "Expected NAME, PMID or }")
            else:  # state 3, a PMID
                name, _ = seen[0].children[-1]
                seen[0].children[-1] = (name, value)
                state = 2
    e.lineno = -1  # past the end of input: libpcp's errors from here have no line

    def later(file: str, line: int, reason: str, newline: str = "") -> PmnsError:
        e.err(reason + newline)
        return e.error(file, line, reason)

    # libpcp's pass 2 (errors found here have no line number)
    fname = last[0]

    def findseen(path: str) -> Optional[_Block]:
        for k, block in enumerate(seen):
            if block.path == path:
                return seen.pop(k)
        return None

    root_block = findseen("root")
    if root_block is None:
        raise later(fname, 0, 'No name space entry for "root"')
    if findseen("root") is not None:
        raise later(fname, 0, 'Multiple name space entries for "root"')
    ns = Namespace()

    def attach(base: str, node: Node, block: _Block) -> None:
        for child, p in block.children:
            sub = node.children[child] = Node(child, node, pmid=p)  # duplicates: the last wins, as libpcp
            if p is None:
                path = f"{base}.{child}" if base else child
                found = findseen(path)
                if found is None:
                    raise later(
                        block.file, block.line, f'Cannot find definition for non-terminal node "{path}" in name space'
                    )
                attach(path, sub, found)

    attach("", ns.root, root_block)
    if seen:
        for block in seen[:-1]:  # libpcp reports each, the most recent first
            e.err(f'Disconnected subtree ("{block.path}") in name space')
        raise later(seen[-1].file, seen[-1].line, f'Disconnected subtree ("{seen[-1].path}") in name space')
    ns._index()
    if not dupok:
        for p, names in ns._by_pmid.items():
            if len(names) > 1 and not is_dynamic_root(p):
                reason = (
                    f'Duplicate metric id ({_pmid_text(p)}) in name space for metrics "{names[1]}" and "{names[0]}"'
                )
                raise later(fname, 0, reason, "\n")
    return ns


def _pmid_text(p: int) -> str:
    return f"{pmid_domain(p)}.{pmid_cluster(p)}.{pmid_item(p)}"


def loads(text: str, name: str = "<pmns>", resolve: Optional[Resolver] = None, *, dupok: bool = True) -> Namespace:
    """:func:`preprocess` then :func:`parse` PMNS text."""
    return parse(preprocess(text, name, resolve), dupok=dupok)


def load(
    path: str, var_dir: Optional[str] = None, *, include_dirs: Sequence[str] = (), dupok: bool = True
) -> Namespace:
    """Read a PMNS file as ``pminfo -n path`` does.

    ``#include`` searches as pmcpp does: the name as given, the directory of
    ``path``, each of ``include_dirs`` (pmcpp's ``-I``), then
    ``$PCP_VAR_DIR/pmns`` (``var_dir`` overrides ``$PCP_VAR_DIR``).

    Raises:
        PmnsError: unreadable or malformed.
    """
    pmns_dir = os.path.join(var_dir or os.environ.get("PCP_VAR_DIR", "/var/lib/pcp"), "pmns")
    search = [os.path.dirname(path) or ".", *include_dirs, pmns_dir]

    def resolve(target: str, angle: bool, including: str) -> tuple[str, str]:
        candidates = [target] + ([] if os.path.isabs(target) else [os.path.join(d, target) for d in search])
        for cand in candidates:
            if os.path.isfile(cand):
                with open(cand, encoding="utf-8", errors="replace") as f:
                    return cand, f.read()
        raise FileNotFoundError(2, "No such file or directory", target)

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as err:
        raise PmnsError(path, 0, err.strerror or str(err)) from err
    return loads(text, path, resolve, dupok=dupok)
