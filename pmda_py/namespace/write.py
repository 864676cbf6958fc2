"""PMNS text from a namespace, and the fragments Install needs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from pmda_py.namespace.base import is_dynamic_root, unwritable_name
from pmda_py.namespace.tree import Namespace, Node
from pmda_py.pmapi import pmid_cluster, pmid_domain, pmid_item

__all__ = ["write", "write_fragment"]

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
    names subtrees written ``SYMDOM:*:*``.

    Raises:
        ValueError: a name libpcp could not read back from the file
            (:func:`~pmda_py.namespace.base.unwritable_name`).
    """
    for full in [top, *leaves, *dynamic]:
        problem = unwritable_name(full)
        if problem:
            raise ValueError(problem)
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
