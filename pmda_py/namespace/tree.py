"""The namespace tree: names, PMIDs, children, traversal."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Optional

import attrs

from pmda_py.namespace.base import is_dynamic_root
from pmda_py.pmapi import pmid_cluster

__all__ = ["Namespace", "Node"]

# --------------------------------------------------------------------------
# the tree


@attrs.define(eq=False, init=False)
class Node:
    """One PMNS node: a leaf has a PMID (a dynamic subtree's root is ``511.DOMAIN.0``).

    The link to the parent is weak: a tree has no reference cycles, so a
    replaced one is freed at once (a dynamic table's rescans rebuild it; as
    cycles, old trees waited for the cyclic collector, or outlived a
    ``gc.freeze``)."""

    name: str
    _parent: Optional[weakref.ReferenceType[Node]] = attrs.field(repr=False)
    children: dict[str, Node] = attrs.field(repr=False)
    pmid: Optional[int] = None  # leaves; a dynamic subtree is 511.DOMAIN.0

    def __init__(
        self,
        name: str,
        parent: Optional[Node] = None,
        children: Optional[dict[str, Node]] = None,
        pmid: Optional[int] = None,
    ) -> None:
        self.name = name
        self._parent = None if parent is None else weakref.ref(parent)
        self.children = {} if children is None else children
        self.pmid = pmid

    @property
    def parent(self) -> Optional[Node]:
        return None if self._parent is None else self._parent()

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


#: the children of every leaf :meth:`Namespace.add` makes: one empty dict for
#: all (a leaf never gets children: add() refuses a name below a leaf)
_LEAF_CHILDREN: dict[str, Node] = {}


@attrs.define(eq=False)
class Namespace:
    """A loaded PMNS.

    Leaves carry a PMID; the root of a dynamic subtree is a leaf whose PMID
    is ``511.DOMAIN.0`` (as in libpcp), its names below are the PMDA's to
    answer.  Children keep the order of the file.
    """

    root: Node = attrs.field(factory=lambda: Node("root"))
    _by_pmid: dict[int, list[str]] = attrs.field(factory=dict, repr=False)
    #: keep every PMID's names for :meth:`names` as names are added (False:
    #: :meth:`names` walks the tree; a list per PMID less, for a big tree
    #: whose owner knows each PMID's name already)
    pmid_names: bool = attrs.field(default=True, kw_only=True)
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
        *inner, last = name.split(".")
        for part in inner:
            nxt = node.children.get(part)
            if nxt is None:  # (no Node made for a name that is there: 100 000s of names)
                nxt = node.children[part] = Node(part, node)
            elif nxt.pmid is not None:
                raise ValueError(f"{nxt.full_name()} is a leaf")
            node = nxt
        if last in node.children:
            raise ValueError(f"{name} is already in the namespace")
        node.children[last] = Node(last, node, _LEAF_CHILDREN, pmid=p)
        if self.pmid_names:
            names = self._by_pmid.setdefault(p, [])
            names.append(name)
            self._stale = self._stale or len(names) > 1

    def remove(self, name: str) -> None:
        """Remove the leaf ``name``, and every non-leaf it leaves empty (the
        tree is then what adding the other names alone makes).

        Raises:
            KeyError: ``name`` is not a leaf.
        """
        node = self.node(name)
        if node is None or node.pmid is None or node.parent is None:
            raise KeyError(name)
        names = self._by_pmid.get(node.pmid) if self.pmid_names else None
        if names is not None:
            if name in names:
                names.remove(name)
            if not names:
                del self._by_pmid[node.pmid]
        parent = node.parent
        del parent.children[node.name]
        while not parent.children and parent.parent is not None:
            del parent.parent.children[parent.name]
            parent = parent.parent

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
        if not self.pmid_names:
            return [n for n, nd in self._leaf_nodes(self.root) if nd.pmid == p]
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
