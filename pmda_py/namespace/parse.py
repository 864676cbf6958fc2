"""libpcp's PMNS loader over pmcpp's output, and the file readers."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Optional

import attrs

from pmda_py.namespace.base import PmnsError, Resolver, is_dynamic_root
from pmda_py.namespace.cpp import preprocess
from pmda_py.namespace.tree import Namespace, Node
from pmda_py.pmapi import DYNAMIC_PMID, pmid, pmid_cluster, pmid_domain, pmid_item

__all__ = ["load", "loads", "parse"]

_COLON = re.compile(r"[ \t\r\f\v]*:[ \t\r\f\v]*")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_PATH = re.compile(r"[A-Za-z][A-Za-z0-9_.]*")


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
