"""PCP's ASCII namespace (PMNS) files: read them as pmcpp + libpcp do, and
write fragments for Install.

The preprocessor handles what PMNS files use: C comments, ``#include
"file"`` / ``<file>`` (searched in the including file's directory, then
``$PCP_VAR_DIR/pmns``), ``#define NAME value``, ``#undef``, ``#ifdef``,
``#ifndef``, ``#else``, ``#endif``, and macro substitution of whole words.
The grammar: ``path { child ... }`` blocks, where a child is a non-leaf
(defined by a later block), a leaf ``name DOMAIN:CLUSTER:ITEM``, or a dynamic
subtree ``name DOMAIN:*:*`` (answered by the PMDA through PMNS PDUs).

Pure parsing over text; :func:`load` is the thin file-reading wrapper.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable

import attrs

from pmda_py.pmapi import DYNAMIC_PMID, pmid

__all__ = ["Namespace", "PmnsError", "load", "parse", "preprocess", "write_fragment"]


class PmnsError(ValueError):
    """A PMNS file is malformed: the message names the file and line."""


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _strip_comments(text: str) -> str:
    # C comments, keeping newlines so line numbers stay right
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def preprocess(
    text: str,
    name: str = "<pmns>",
    resolve: Callable[[str, bool, str], tuple[str, str]] | None = None,
    macros: dict[str, str] | None = None,
) -> list[tuple[str, int, str]]:
    """Run the pmcpp subset; returns ``(file, line, text)`` for each output line.

    ``resolve(target, angle, including_file)`` returns ``(path, text)`` of an
    included file (raising OSError if it cannot be found).
    """
    macros = {} if macros is None else macros
    out: list[tuple[str, int, str]] = []
    stack: list[bool] = []  # active state of each open conditional
    for lineno, raw in enumerate(_strip_comments(text).splitlines(), 1):
        line = raw.strip()
        active = all(stack)
        if line.startswith("#"):
            parts = line[1:].split(None, 2)
            directive = parts[0] if parts else ""
            if directive in ("ifdef", "ifndef"):
                if len(parts) < 2:
                    raise PmnsError(f"{name}:{lineno}: #{directive} needs a name")
                defined = parts[1] in macros
                stack.append(defined if directive == "ifdef" else not defined)
            elif directive == "else":
                if not stack:
                    raise PmnsError(f"{name}:{lineno}: #else without #if")
                stack[-1] = not stack[-1]
            elif directive == "endif":
                if not stack:
                    raise PmnsError(f"{name}:{lineno}: #endif without #if")
                stack.pop()
            elif not active:
                continue
            elif directive == "define":
                if len(parts) < 2:
                    raise PmnsError(f"{name}:{lineno}: #define needs a name")
                macros[parts[1]] = parts[2].strip() if len(parts) > 2 else ""
            elif directive == "undef":
                macros.pop(parts[1] if len(parts) > 1 else "", None)
            elif directive == "include":
                target = line[len("#include") :].strip()
                if len(target) < 2 or target[0] not in '<"' or target[-1] not in '>"':
                    raise PmnsError(f"{name}:{lineno}: bad #include {target!r}")
                if resolve is None:
                    raise PmnsError(f"{name}:{lineno}: cannot #include {target} here")
                try:
                    path, sub = resolve(target[1:-1], target[0] == "<", name)
                except OSError as err:
                    raise PmnsError(f"{name}:{lineno}: cannot open {target}: {err.strerror}") from err
                out.extend(preprocess(sub, path, resolve, macros))
            # other directives (#line, #pragma) are ignored
            continue
        if not active or not line:
            continue
        out.append((name, lineno, _WORD.sub(lambda m: macros.get(m.group(0), m.group(0)), line)))
    if stack:
        raise PmnsError(f"{name}: unterminated #if")
    return out


@attrs.define
class _Node:
    children: dict[str, _Node] = attrs.field(factory=dict)
    pmid: int | None = None  # leaf PMID (dynamic roots: DYNAMIC_PMID.domain.0)
    dynamic_domain: int | None = None


@attrs.define
class Namespace:
    """A loaded PMNS: names, PMIDs, children and dynamic subtrees."""

    root: _Node = attrs.field(factory=_Node)

    def lookup(self, name: str) -> int:
        """PMID of a leaf; for a name at or below a dynamic subtree, the
        dynamic root's PMID (511.DOMAIN.0), as pmLookupName gives locally.

        Raises:
            KeyError: unknown name or a non-leaf.
        """
        node = self.root
        for part in name.split("."):
            if node.dynamic_domain is not None:
                return node.pmid  # type: ignore[return-value]
            nxt = node.children.get(part)
            if nxt is None:
                raise KeyError(name)
            node = nxt
        if node.pmid is None:
            raise KeyError(name)
        return node.pmid

    def names(self, p: int) -> list[str]:
        """Every name of PMID ``p`` (empty if none)."""
        out: list[str] = []
        self._walk(self.root, "", lambda n, node: out.append(n) if node.pmid == p else None)
        return out

    def node(self, name: str) -> _Node | None:
        node = self.root
        if not name:
            return node
        for part in name.split("."):
            nxt = node.children.get(part)
            if nxt is None:
                return None
            node = nxt
        return node

    def children(self, name: str) -> list[tuple[str, bool]]:
        """``(child, is_leaf)`` for the children of ``name``."""
        node = self.node(name)
        if node is None or node.pmid is not None:
            raise KeyError(name)
        return [(k, v.pmid is not None) for k, v in node.children.items()]

    def traverse(self, name: str = "") -> list[str]:
        """Full names of every leaf at or below ``name``."""
        node = self.node(name)
        if node is None:
            raise KeyError(name)
        out: list[str] = []
        if node.pmid is not None:
            return [name]
        self._walk(node, name, lambda n, nd: out.append(n) if nd.pmid is not None else None)
        return out

    def leaves(self) -> dict[str, int]:
        """Every static leaf: ``{name: pmid}``."""
        out: dict[str, int] = {}

        def visit(n: str, nd: _Node) -> None:
            if nd.pmid is not None and nd.dynamic_domain is None:
                out[n] = nd.pmid

        self._walk(self.root, "", visit)
        return out

    def dynamic_roots(self) -> dict[str, int]:
        """Dynamic subtrees: ``{name: domain}``."""
        out: dict[str, int] = {}

        def visit(n: str, nd: _Node) -> None:
            if nd.dynamic_domain is not None:
                out[n] = nd.dynamic_domain

        self._walk(self.root, "", visit)
        return out

    def _walk(self, node: _Node, prefix: str, visit: Callable[[str, _Node], None]) -> None:
        for k, child in node.children.items():
            full = f"{prefix}.{k}" if prefix else k
            visit(full, child)
            if child.pmid is None:
                self._walk(child, full, visit)


_LEAF = re.compile(r"^(\d+):(\d+|\*):(\d+|\*)$")


def parse(lines: Iterable[tuple[str, int, str]]) -> Namespace:
    """Build a :class:`Namespace` from preprocessed lines.

    Raises:
        PmnsError: syntax errors, undefined non-leaves, duplicate names.
    """
    tokens: list[tuple[str, int, str]] = []
    for fname, lineno, text in lines:
        for tok in re.findall(r"[{}]|[^\s{}]+", text):
            tokens.append((fname, lineno, tok))
    blocks: dict[str, list[tuple[str, int, str, str | None]]] = {}
    order: list[str] = []
    k = 0
    while k < len(tokens):
        fname, lineno, path = tokens[k]
        if k + 1 >= len(tokens) or tokens[k + 1][2] != "{":
            raise PmnsError(f"{fname}:{lineno}: expected '{{' after {path!r}")
        if path in blocks:
            raise PmnsError(f"{fname}:{lineno}: {path} defined twice")
        k += 2
        entries: list[tuple[str, int, str, str | None]] = []
        while True:
            if k >= len(tokens):
                raise PmnsError(f"{fname}: missing '}}' for {path}")
            f2, l2, tok = tokens[k]
            if tok == "}":
                k += 1
                break
            if tok == "{":
                raise PmnsError(f"{f2}:{l2}: unexpected '{{'")
            spec = None
            if k + 1 < len(tokens) and _LEAF.match(tokens[k + 1][2]):
                spec = tokens[k + 1][2]
                k += 1
            entries.append((f2, l2, tok, spec))
            k += 1
        blocks[path] = entries
        order.append(path)
    ns = Namespace()
    if "root" not in blocks:
        if not blocks:
            return ns
        raise PmnsError("no root { } block")

    def build(path: str, node: _Node, full: str, depth: int) -> None:
        if depth > 64:
            raise PmnsError(f"{path}: namespace nested too deep (a loop?)")
        for fname, lineno, child, spec in blocks[path]:
            if child in node.children:
                raise PmnsError(f"{fname}:{lineno}: duplicate name {full + '.' if full else ''}{child}")
            sub_full = f"{full}.{child}" if full else child
            if spec is None:
                if sub_full not in blocks:
                    raise PmnsError(f"{fname}:{lineno}: non-leaf {sub_full} is not defined")
                nd = node.children[child] = _Node()
                build(sub_full, nd, sub_full, depth + 1)
                continue
            d, c, i = spec.split(":")
            if c == "*" or i == "*":
                node.children[child] = _Node(pmid=pmid(DYNAMIC_PMID, int(d), 0), dynamic_domain=int(d))
            else:
                node.children[child] = _Node(pmid=pmid(int(d), int(c), int(i)))

    build("root", ns.root, "", 0)
    return ns


def load(path: str, var_dir: str | None = None) -> Namespace:
    """Read a PMNS file (as ``pminfo -n`` does) and parse it.

    Raises:
        PmnsError: unreadable or malformed.
    """
    pmns_dir = os.path.join(var_dir or os.environ.get("PCP_VAR_DIR", "/var/lib/pcp"), "pmns")

    def resolve(target: str, angle: bool, including: str) -> tuple[str, str]:
        here = os.path.dirname(including)
        candidates = [os.path.join(pmns_dir, target)] if angle else [os.path.join(here, target)]
        candidates += [os.path.join(pmns_dir, target), os.path.join(here, target)]
        for cand in candidates if not os.path.isabs(target) else [target]:
            if os.path.exists(cand):
                with open(cand, encoding="utf-8", errors="replace") as f:
                    return cand, f.read()
        raise FileNotFoundError(2, "No such file or directory", target)

    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as err:
        raise PmnsError(f"{path}: {err.strerror}") from err
    return parse(preprocess(text, path, resolve))


def write_fragment(top: str, leaves: dict[str, tuple[int, int]], symdom: str, dynamic: Iterable[str] = ()) -> str:
    """A PMNS fragment for Install: ``leaves`` maps full names below ``top``
    to ``(cluster, item)`` written as ``SYMDOM:cluster:item``; ``dynamic``
    names subtrees written ``SYMDOM:*:*``."""
    tree: dict[str, dict[str, str | None]] = {top: {}}
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
