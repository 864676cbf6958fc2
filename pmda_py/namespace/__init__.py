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

from pmda_py.namespace.base import PmnsError, Resolver, is_dynamic_root
from pmda_py.namespace.cpp import preprocess
from pmda_py.namespace.parse import load, loads, parse
from pmda_py.namespace.tree import Namespace, Node
from pmda_py.namespace.write import write, write_fragment

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
