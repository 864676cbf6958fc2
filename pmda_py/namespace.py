"""PCP's ASCII namespace (PMNS) files: read them exactly as ``pmcpp`` and
libpcp's ``pmLoadASCIINameSpace`` do, and write them.

Two pure stages over text, then the tree:

* :func:`preprocess` is ``pmcpp``: C comments (which may span lines and even
  files), ``#include "file"`` / ``<file>`` (at most 4 levels deep),
  ``#define NAME value`` (``'value'`` / ``"value"`` quoted; empty by
  default), ``#undef``, ``#ifdef`` / ``#ifndef`` / ``#else`` / ``#endif``
  (not nested), and substitution of whole words ``[A-Za-z_][A-Za-z0-9_]*``.
  Directives start in column 1.  pmcpp's quirks are kept (a last line
  without a newline is dropped), because a PMNS that
  pmcpp rejects is one pmcd, pminfo and dbpmda refuse: a macro may not be
  redefined, and an ``#else`` that turns a section *on* fails with "Macro
  redefinition" once any macro was ``#undef``'d or an earlier ``#else`` did
  the same.  ``#shell`` is refused (it would run a command).  Included files
  are found by a resolver callback; pmcpp's search order (the name as
  given, the directory of the top-level file, then ``$PCP_VAR_DIR/pmns``,
  for both ``""`` and ``<>``) is :func:`load`'s.
* :func:`parse` is libpcp's loader: whitespace-separated tokens (blanks
  around ``:`` ignored); blocks ``path { child ... }`` where a child is a
  non-leaf (a later or earlier block of that full path), a leaf ``name
  DOMAIN:CLUSTER:ITEM`` (domain <= 510, cluster <= 4095, item <= 1023) or a
  dynamic subtree ``name DOMAIN:*:*`` (and, as libpcp has it, a bare
  ``name DOMAIN``).  It rejects what libpcp rejects: no or several ``root``
  blocks, a non-leaf without its block, a block nothing refers to
  ("disconnected subtree"), duplicate names in a block, and (``dupok=False``,
  pmcd's mode) one PMID with two names.

:class:`Namespace` answers name -> PMID, PMID -> names, children (with leaf
status), traversal and "which dynamic subtree (domain) is this name under".
:func:`write` and :func:`write_fragment` produce PMNS text.  Every error is a
:class:`PmnsError` naming the file and line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Optional

import attrs

from pmda_py.pmapi import DYNAMIC_PMID, pmid, pmid_cluster, pmid_domain, pmid_item

__all__ = [
    "Namespace",
    "Node",
    "PmnsError",
    "Resolver",
    "is_dynamic_root",
    "load",
    "loads",
    "parse",
    "preprocess",
    "write",
    "write_fragment",
]

#: ``resolve(target, angle, including_file) -> (path, text)``: the file an
#: ``#include`` names (``angle``: written ``<target>``); raises ``OSError``
#: when there is none.
Resolver = Callable[[str, bool, str], "tuple[str, str]"]

_MAXLEVEL = 5  # pmcpp: the top-level file plus 4 levels of #include
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COLON = re.compile(r"[ \t\r\f\v]*:[ \t\r\f\v]*")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PATH = re.compile(r"[A-Za-z][A-Za-z0-9_.]*")


class PmnsError(ValueError):
    """A PMNS file is malformed: ``file:line: reason`` (line 0: the whole
    file, or an error found after reading it)."""

    def __init__(self, file: str, line: int, reason: str) -> None:
        super().__init__(f"{file}:{line}: {reason}" if line > 0 else f"{file}: {reason}")
        self.file = file
        self.line = line
        self.reason = reason


def is_dynamic_root(p: int) -> bool:
    """Is PMID ``p`` the marker of a dynamic subtree (``511.DOMAIN.0``)?"""
    return pmid_domain(p) == DYNAMIC_PMID and pmid_item(p) == 0


# --------------------------------------------------------------------------
# pmcpp


@attrs.define
class _Cpp:
    """pmcpp's state, which is global across #include'd files."""

    resolve: Optional[Resolver]
    macros: list[list[str]]  # [name, value]; #undef empties the name, as pmcpp does
    out: list[tuple[str, int, str]] = attrs.field(factory=list)
    in_if: Optional[bool] = None  # None: not in #ifdef; else is the section on
    if_line: int = 0
    skip: bool = False
    comment_line: int = 0  # line where an open comment began (0: none)

    def lookup(self, name: str) -> Optional[list[str]]:
        for m in self.macros:
            if m[0] == name:
                return m
        return None

    def substitute(self, text: str) -> str:
        if not self.macros:
            return text
        table = {m[0]: m[1] for m in self.macros if m[0]}
        return _WORD.sub(lambda w: table.get(w.group(0), w.group(0)), text)

    def directive(self, line: str, fail: Callable[[str], PmnsError]) -> Optional[bool]:
        """pmcpp's ``directive()``: None for a line that is no directive,
        else whether the following lines are skipped."""
        for op in ("define", "undef", "ifdef", "ifndef", "endif", "else"):
            if line.startswith(op, 1):
                break
        else:
            return None
        rest = line[1 + len(op) :].lstrip(" \t")
        name = value = ""
        if op not in ("endif", "else"):
            if not rest:
                raise fail("Missing macro name")
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", rest)
            name = m.group(0) if m else ""
            rest = rest[len(name) :]
            if not name or (rest and rest[0] not in " \t\r\f\v"):
                raise fail("Illegal character in macro name")
            if op == "define":
                rest = rest.lstrip(" \t")
                if rest[:1] in ("'", '"'):
                    end = rest.find(rest[0], 1)
                    if end < 0:
                        raise fail("Unterminated value string in #define")
                    value, rest = rest[1:end], rest[end + 1 :]
                else:
                    value = re.match(r"[^\s]*", rest).group(0)  # type: ignore[union-attr]
                    rest = rest[len(value) :]
        if rest.strip(" \t\r"):
            raise fail("Unexpected extra text in a control line")
        if op == "endif":
            if self.in_if is None:
                raise fail("No matching #ifdef or #ifndef for #endif")
            self.in_if = None
            return False
        if op == "else":
            if self.in_if is None:
                raise fail("No matching #ifdef or #ifndef for #else")
            self.in_if = not self.in_if
        elif op in ("ifdef", "ifndef") and self.in_if is not None:
            raise fail("Nested #ifdef or #ifndef")
        if self.in_if is False:
            return True
        found = self.lookup(name)
        if found is not None:
            if op == "ifdef":
                self.in_if = True
                return False
            if op == "ifndef":
                self.in_if = False
                return True
            if op == "undef":
                found[0] = ""
                return False
            raise fail("Macro redefinition")  # define, and pmcpp's #else quirk
        if op in ("ifdef", "ifndef"):
            self.in_if = op == "ifndef"
            return not self.in_if
        if op in ("define", "else"):  # pmcpp's #else adds a macro with no name
            self.macros.append([name, value])
        return False

    def run(self, text: str, fname: str, depth: int) -> None:
        lineno = 0
        lines = text.split("\n")
        for raw in lines[:-1]:  # pmcpp ignores a last line without its newline
            lineno += 1

            def fail(reason: str, lineno: int = lineno) -> PmnsError:
                return PmnsError(fname, lineno, reason)

            line, blanked = self._strip_comments(raw, fname, lineno)
            if blanked:
                line = line.rstrip()
            if self.comment_line and not line:
                continue
            if line.startswith("#include"):
                if not self.skip:
                    self._include(line, fname, depth, fail)
                continue
            if line.startswith("#shell"):
                if not self.skip:
                    raise fail("#shell is not supported (it would run a command)")
                continue
            if line.startswith("#"):
                skip = self.directive(line, fail)
                if skip is not None:
                    self.skip = skip
                    continue
            elif self.skip:
                continue
            if line.strip():
                self.out.append((fname, lineno, self.substitute(line)))

    def _strip_comments(self, line: str, fname: str, lineno: int) -> tuple[str, bool]:
        out: list[str] = []
        blanked = False
        k = 0
        while k < len(line):
            if self.comment_line:
                blanked = True
                end = line.find("*/", k)
                if end < 0:
                    out.append(" " * (len(line) - k))
                    break
                out.append(" " * (end + 2 - k))
                k = end + 2
                self.comment_line = 0
            else:
                start = line.find("/*", k)
                if start < 0:
                    out.append(line[k:])
                    break
                out.append(line[k:start] + "  ")
                k = start + 2
                self.comment_line = lineno
                blanked = True
        return "".join(out), blanked

    def _include(self, line: str, fname: str, depth: int, fail: Callable[[str], PmnsError]) -> None:
        rest = line[len("#include") :].lstrip(" \t")
        if rest[:1] not in ('"', "<"):
            raise fail('Expected " or < after #include')
        close = '"' if rest[0] == '"' else ">"
        end = rest.find(close, 1)
        if end < 0:
            raise fail(f"Expected {close} after file name")
        if rest[end + 1 :].strip():
            raise fail("Unexpected extra text in #include line")
        if depth >= _MAXLEVEL - 1:
            raise fail("#include and/or #shell nesting too deep")
        if self.resolve is None:
            raise fail(f"Cannot open file for #include: {rest[: end + 1]} (no include resolver)")
        try:
            path, sub = self.resolve(rest[1:end], rest[0] == "<", fname)
        except OSError:
            raise fail(f"Cannot open file for #include: {rest[: end + 1]}") from None
        self.run(sub, path, depth + 1)


def preprocess(
    text: str,
    name: str = "<pmns>",
    resolve: Optional[Resolver] = None,
    macros: Optional[dict[str, str]] = None,
) -> list[tuple[str, int, str]]:
    """Run pmcpp over ``text`` (the contents of file ``name``).

    Returns ``(file, line, text)`` for each non-blank output line.  ``macros``
    are predefined (pmcpp's ``-D``); ``resolve`` finds included files.

    Raises:
        PmnsError: what pmcpp reports (and exits 1 for).
    """
    cpp = _Cpp(resolve, [[k, v] for k, v in (macros or {}).items()])
    cpp.run(text, name, 0)
    if cpp.comment_line:
        raise PmnsError(name, 0, f"Comment at line {cpp.comment_line} not terminated before end of file")
    if cpp.in_if is not None:
        raise PmnsError(name, 0, "End of input and no matching #endif for #ifdef or #ifndef")
    return cpp.out


# --------------------------------------------------------------------------
# the tree


@attrs.define(eq=False)
class Node:
    """One PMNS node: a leaf has a PMID (a dynamic subtree's root is ``511.DOMAIN.0``)."""

    name: str
    parent: Optional[Node] = attrs.field(default=None, repr=False)
    children: dict[str, Node] = attrs.field(factory=dict, repr=False)
    pmid: Optional[int] = None  # leaves; a dynamic subtree is 511.DOMAIN.0

    @property
    def is_leaf(self) -> bool:
        return self.pmid is not None

    @property
    def dynamic_domain(self) -> Optional[int]:
        return pmid_cluster(self.pmid) if self.pmid is not None and is_dynamic_root(self.pmid) else None

    def full_name(self) -> str:
        parts: list[str] = []
        node: Optional[Node] = self
        while node is not None and node.parent is not None:
            parts.append(node.name)
            node = node.parent
        return ".".join(reversed(parts))


@attrs.define(eq=False)
class Namespace:
    """A loaded PMNS.

    Leaves carry a PMID; the root of a dynamic subtree is a leaf whose PMID
    is ``511.DOMAIN.0`` (as in libpcp), its names below are the PMDA's to
    answer.  Children keep the order of the file.
    """

    root: Node = attrs.field(factory=lambda: Node("root"))
    _by_pmid: dict[int, list[str]] = attrs.field(factory=dict, repr=False)
    #: a PMID got a second name by add(): its names' order is rebuilt from
    #: the tree at the next names() (insertion order is not PMNS order)
    _stale: bool = attrs.field(default=False, repr=False)

    # -- building
    def add(self, name: str, p: int) -> None:
        """Add the leaf ``name`` with PMID ``p`` (creating non-leaves).

        Raises:
            ValueError: ``name`` or one of its ancestors is already a leaf,
                or ``name`` is a non-leaf.
        """
        node = self.root
        parts = name.split(".")
        for part in parts[:-1]:
            node = node.children.setdefault(part, Node(part, node))
            if node.is_leaf:
                raise ValueError(f"{node.full_name()} is a leaf")
        if parts[-1] in node.children:
            raise ValueError(f"{name} is already in the namespace")
        node.children[parts[-1]] = Node(parts[-1], node, pmid=p)
        names = self._by_pmid.setdefault(p, [])
        names.append(name)
        self._stale = self._stale or len(names) > 1

    def _index(self) -> None:
        self._stale = False
        self._by_pmid.clear()
        for name, node in self._leaf_nodes(self.root):
            assert node.pmid is not None
            self._by_pmid.setdefault(node.pmid, []).append(name)

    # -- queries
    def node(self, name: str) -> Optional[Node]:
        """The node of ``name`` ("" is the root), or None."""
        node = self.root
        if not name:
            return node
        for part in name.split("."):
            nxt = node.children.get(part)
            if nxt is None:
                return None
            node = nxt
        return node

    def lookup(self, name: str) -> int:
        """PMID of a leaf; for a name at or below a dynamic subtree, the
        subtree's PMID ``511.DOMAIN.0``, as libpcp's local lookup gives.

        Raises:
            KeyError: unknown name or a non-leaf.
        """
        node = self.root
        for part in name.split("."):
            if node.is_leaf:
                break
            nxt = node.children.get(part)
            if nxt is None:
                raise KeyError(name)
            node = nxt
        if node.pmid is None or (node.full_name() != name and not is_dynamic_root(node.pmid)):
            raise KeyError(name)
        return node.pmid

    def dynamic_domain(self, name: str) -> Optional[int]:
        """The domain of the dynamic subtree ``name`` is at or below, else None."""
        node = self.root
        for part in name.split("."):
            nxt = node.children.get(part)
            if nxt is None:
                return None
            if nxt.dynamic_domain is not None:
                return nxt.dynamic_domain
            node = nxt
        return None

    def names(self, p: int) -> list[str]:
        """Every name of PMID ``p``, in PMNS order (libpcp's ``pmNameAll``
        lists them the other way round); empty if none."""
        if self._stale:
            self._index()
        return list(self._by_pmid.get(p, ()))

    def children(self, name: str) -> list[tuple[str, bool]]:
        """``(child, is_leaf)`` for the children of the non-leaf ``name``
        (dynamic subtree roots count as leaves here).

        Raises:
            KeyError: unknown name or a leaf.
        """
        node = self.node(name)
        if node is None or node.is_leaf:
            raise KeyError(name)
        return [(k, v.is_leaf) for k, v in node.children.items()]

    def traverse(self, name: str = "") -> list[str]:
        """Full names of every leaf at or below ``name``, in PMNS order.

        Raises:
            KeyError: unknown name.
        """
        node = self.node(name)
        if node is None:
            raise KeyError(name)
        if node.is_leaf:
            return [name]
        return [n for n, _ in self._leaf_nodes(node)]

    def leaves(self) -> dict[str, int]:
        """Every static leaf: ``{name: pmid}`` (dynamic subtrees left out)."""
        nodes = self._leaf_nodes(self.root)
        return {n: nd.pmid for n, nd in nodes if nd.pmid is not None and nd.dynamic_domain is None}

    def dynamic_roots(self) -> dict[str, int]:
        """Dynamic subtrees: ``{name: domain}``."""
        return {n: d for n, nd in self._leaf_nodes(self.root) if (d := nd.dynamic_domain) is not None}

    def _leaf_nodes(self, node: Node) -> Iterator[tuple[str, Node]]:
        prefix = node.full_name()
        for k, child in node.children.items():
            full = f"{prefix}.{k}" if prefix else k
            if child.is_leaf:
                yield full, child
            else:
                yield from self._leaf_nodes(child)


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
    for fname, lineno, text in lines:
        last = (fname, lineno)

        def fail(reason: str, fname: str = fname, lineno: int = lineno) -> PmnsError:
            return PmnsError(fname, lineno, reason)

        text = _COLON.sub(":", text).strip()
        if text.startswith("#"):
            raise fail("Illegal line number control number")
        for tok in text.split():
            if tok == "{":
                kind = "{"
            elif tok == "}":
                kind = "}"
            elif _NAME.fullmatch(tok):
                kind = "NAME"
            elif _PATH.fullmatch(tok):
                kind = "PATH"
            else:
                kind = "PMID" if _pmid_token(tok, fail) is not None else "BOGUS"
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
                        raise fail(f'Duplicate name "{dup}" in subtree for "{seen[0].path}"')
                else:
                    raise fail("Expected NAME or }" if state == 2 else "Expected NAME, PMID or }")
            else:  # state 3, a PMID
                name, _ = seen[0].children[-1]
                seen[0].children[-1] = (name, _pmid_token(tok, fail))
                state = 2
    # libpcp's pass 2 (errors found here have no line number)
    fname = last[0]

    def findseen(path: str) -> Optional[_Block]:
        for k, block in enumerate(seen):
            if block.path == path:
                return seen.pop(k)
        return None

    root_block = findseen("root")
    if root_block is None:
        raise PmnsError(fname, 0, 'No name space entry for "root"')
    if findseen("root") is not None:
        raise PmnsError(fname, 0, 'Multiple name space entries for "root"')
    ns = Namespace()

    def attach(base: str, node: Node, block: _Block) -> None:
        for child, p in block.children:
            sub = node.children[child] = Node(child, node, pmid=p)  # duplicates: the last wins, as libpcp
            if p is None:
                path = f"{base}.{child}" if base else child
                found = findseen(path)
                if found is None:
                    raise PmnsError(
                        block.file, block.line, f'Cannot find definition for non-terminal node "{path}" in name space'
                    )
                attach(path, sub, found)

    attach("", ns.root, root_block)
    if seen:
        raise PmnsError(seen[-1].file, seen[-1].line, f'Disconnected subtree ("{seen[-1].path}") in name space')
    ns._index()
    if not dupok:
        for p, names in ns._by_pmid.items():
            if len(names) > 1 and not is_dynamic_root(p):
                reason = (
                    f'Duplicate metric id ({_pmid_text(p)}) in name space for metrics "{names[1]}" and "{names[0]}"'
                )
                raise PmnsError(fname, 0, reason)
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


# --------------------------------------------------------------------------
# writers


def _spec(p: int, symdom: Optional[str]) -> str:
    if is_dynamic_root(p):
        return f"{symdom or pmid_cluster(p)}:*:*"
    dom = symdom if symdom is not None else str(pmid_domain(p))
    return f"{dom}:{pmid_cluster(p)}:{pmid_item(p)}"


def write(ns: Namespace, top: str = "", symdom: Optional[str] = None) -> str:
    """PMNS text for ``ns`` (from its ``root``), or for the subtree ``top``
    as an Install fragment (its block first, then one block per non-leaf
    below).  ``symdom`` writes every domain as that macro (``SIMPLE``).
    Reading the result back gives the same tree.

    Raises:
        KeyError: ``top`` is unknown or a leaf.
    """
    node = ns.node(top)
    if node is None or node.is_leaf:
        raise KeyError(top)
    out: list[str] = []

    def block(path: str, nd: Node) -> None:
        out.append(f"{path or 'root'} {{")
        for k, child in nd.children.items():
            out.append(f"    {k}\t{_spec(child.pmid, symdom)}" if child.pmid is not None else f"    {k}")
        out.append("}")
        out.append("")
        for k, child in nd.children.items():
            if not child.is_leaf:
                block(f"{path}.{k}" if path else k, child)

    block(top, node)
    return "\n".join(out)


def write_fragment(top: str, leaves: dict[str, tuple[int, int]], symdom: str, dynamic: Iterable[str] = ()) -> str:
    """A PMNS fragment for Install: ``leaves`` maps full names below ``top``
    to ``(cluster, item)`` written as ``SYMDOM:cluster:item``; ``dynamic``
    names subtrees written ``SYMDOM:*:*``."""
    tree: dict[str, dict[str, Optional[str]]] = {top: {}}
    for full, (c, i) in leaves.items():
        parts = full.split(".")
        for k in range(1, len(parts)):
            parent, child = ".".join(parts[:k]), parts[k]
            tree.setdefault(parent, {})
            if k == len(parts) - 1:
                tree[parent][child] = f"{symdom}:{c}:{i}"
            else:
                tree[parent].setdefault(child, None)
                tree.setdefault(".".join(parts[: k + 1]), {})
    for full in dynamic:
        parts = full.split(".")
        for k in range(1, len(parts)):
            parent = ".".join(parts[:k])
            tree.setdefault(parent, {})
            if k == len(parts) - 1:
                tree[parent][parts[k]] = f"{symdom}:*:*"
            else:
                tree[parent].setdefault(parts[k], None)
    out = []
    for path, kids in tree.items():
        out.append(f"{path} {{")
        for child, spec in kids.items():
            out.append(f"    {child}\t{spec}" if spec else f"    {child}")
        out.append("}\n")
    return "\n".join(out)
