"""The README stays a newcomer's page and the documents hold together:
its paragraphs are short and it links every ``docs/*.md``; every relative
link of README.md and ``docs/*.md`` names a file (and heading) that exists;
the layout table of ``docs/internals.md`` names only paths that exist, and
every part of ``pmda_py/``; a ``docs/*.md`` cited in the code exists.

(The code blocks of these documents are run by ``tests/test_readme.py``.)"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO
from tests.docblocks import DOCS_DIR, README, documents

_FENCE = re.compile(r"^```.*?^```\n?", re.S | re.M)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(path: Path) -> str:
    """The document without its code blocks."""
    return _FENCE.sub("", path.read_text())


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", _prose(path), re.M)}


def _links(path: Path) -> list[str]:
    return [t for t in _LINK.findall(_prose(path)) if not re.match(r"^[a-z]+:", t)]


def test_slug_is_githubs() -> None:
    assert _slug("Running pcp.pmda PMDAs") == "running-pcppmda-pmdas"
    assert _slug("The second bed: PCP 7.x and current Python") == "the-second-bed-pcp-7x-and-current-python"
    assert _slug("Sources that change: `check()`") == "sources-that-change-check"


def test_relative_links_resolve() -> None:
    for doc in documents():
        for target in _links(doc):
            file, _, anchor = target.partition("#")
            dest = (doc.parent / file).resolve() if file else doc
            assert dest.exists(), f"{doc.relative_to(REPO)}: link to {target}: no such file"
            if anchor:
                assert dest.suffix == ".md", target
                assert anchor in _anchors(dest), f"{doc.relative_to(REPO)}: link to {target}: no such heading"


def test_readme_links_every_doc() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in _links(README)}
    docs = sorted(DOCS_DIR.glob("*.md"))
    assert len(docs) >= 8, docs
    for doc in docs:
        assert doc.resolve() in linked, f"README.md does not link {doc.relative_to(REPO)}"


def test_readme_is_short() -> None:
    """What the project is, the two commands, a first table, where to go
    next: no paragraph over 150 words, the whole under 1 200."""
    prose = _prose(README)
    for para in re.split(r"\n\s*\n|\n(?=[*-] )", prose):  # a list item is a paragraph
        assert len(para.split()) <= 150, f"README paragraph of {len(para.split())} words:\n{para}"
    assert len(README.read_text().split()) <= 1200


def _layout_rows() -> list[tuple[list[str], str]]:
    text = (DOCS_DIR / "internals.md").read_text()
    section = text[text.index("## Layout") :]
    section = section[: section.find("\n## ", 1)] if "\n## " in section[1:] else section
    rows = []
    for line in section.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or cells[1].strip() in ("path", "---"):
            continue
        rows.append((re.findall(r"`([^`]+)`", cells[1]), cells[2]))
    return rows


def test_layout_paths_exist() -> None:
    rows = _layout_rows()
    assert len(rows) >= 20, rows
    for paths, _ in rows:
        assert paths, rows
        for p in paths:
            assert (REPO / p).exists(), f"docs/internals.md layout names {p}, which does not exist"


def test_layout_lists_all_of_the_package() -> None:
    named = {p.rstrip("/") for paths, _ in _layout_rows() for p in paths}
    parts = {
        str(p.relative_to(REPO))
        for p in (REPO / "pmda_py").iterdir()
        if p.name not in ("__init__.py", "__pycache__") and not p.name.endswith(".egg-info")
    }
    missing = sorted(parts - named)
    assert not missing, f"docs/internals.md layout does not list {missing}"


def test_cited_docs_exist() -> None:
    """A markdown file of ``docs/`` named in the code, the tests, the benchmarks or the
    scripts is a file of this repository."""
    cited = re.compile(r"\bdocs/[\w.-]+\.md\b")
    for top in ("pmda_py", "tests", "bench", "scripts"):
        for path in sorted((REPO / top).rglob("*")):
            if not path.is_file() or path.suffix not in (".py", ".python", ".sh", "") or "__pycache__" in path.parts:
                continue
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            for name in cited.findall(text):
                assert (REPO / name).exists(), f"{path.relative_to(REPO)} cites {name}, which does not exist"
