"""The documents whose code blocks the tests run: README.md and every
``docs/*.md``, and their fenced blocks.

A block is found by a piece of its text, which must name exactly one block
across all the documents (so moving a block from one document to another
needs no change to the test that runs it)."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from tests.conftest import REPO

README = REPO / "README.md"
DOCS_DIR = REPO / "docs"

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def documents() -> list[Path]:
    """README.md, then ``docs/*.md`` in name order."""
    return [README, *sorted(DOCS_DIR.glob("*.md"))]


@attrs.frozen
class Block:
    path: Path
    lang: str
    text: str

    @property
    def name(self) -> str:
        """The document's path in the repository, e.g. ``docs/tables.md``."""
        return str(self.path.relative_to(REPO))


def blocks() -> list[Block]:
    """Every fenced block of every document, in order."""
    return [Block(path, m.group(1), m.group(2)) for path in documents() for m in _FENCE.finditer(path.read_text())]


def find(piece: str) -> Block:
    found = [b for b in blocks() if piece in b.text]
    assert len(found) == 1, f"{len(found)} blocks of README.md and docs/*.md contain {piece!r}"
    return found[0]


def block(piece: str) -> str:
    """The text of the one block containing ``piece``."""
    return find(piece).text
