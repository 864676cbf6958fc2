"""Live: a PMNS file that does not load, through ``namespace FILE`` and
``-n FILE``, prints what real dbpmda prints: pmcpp's lines, libpcp's error
with its line and caret (and its quirks: a message written over the line
buffer, a scanner error followed by the parser's), and dbpmda's own.  The
files are generated: a valid PMNS broken at random places, a new seed each
run (printed on failure)."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from pmda_py.testing.support import pmda_py_argv
from tests.integration.pcpbed import require_pcp

pytestmark = pytest.mark.pcp

VALID = [
    "root {",
    "    alpha 1:0:0",
    "    beta",
    "    dyn 30:*:*",
    "}",
    "beta {",
    "    one 1:1:1",
    "    two 1:1:2",
    "}",
]

TOKENS = [
    "{", "}", "gamma", "a.b", "_x", "9name", "1:2:3", "511:0:0", "1:4096:0", "1:0:1024", "1:2", "*:*:*",
    "600:*:*", "12", "1:2:3:4", "1 : 2 : 3", "x3", "beta", "alpha", "root", "#pragma x", "/* c */", "# 3 \"f\"",
    ":1:2:3", "1:  :2:3",
]  # fmt: skip
SPACES = [" ", "\t", "  ", " \t ", ""]


def _broken(rng: random.Random) -> str:
    lines = list(VALID)
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(lines) + 1)
        what = rng.random()
        if what < 0.4:
            lines.insert(k, rng.choice(SPACES) + rng.choice(TOKENS) + rng.choice(SPACES))
        elif what < 0.6 and lines:
            del lines[min(k, len(lines) - 1)]
        elif what < 0.8 and lines:
            j = min(k, len(lines) - 1)
            lines[j] = lines[j].replace(" ", rng.choice(SPACES), 1) + rng.choice(SPACES) + rng.choice(TOKENS)
        else:
            lines.insert(k, lines[rng.randrange(len(lines))])  # a duplicate line
    return "\n".join(lines) + "\n"


def _run(argv: list[str], script: str, cwd: Path) -> tuple[int, str, str]:
    r = subprocess.run(argv, input=script, capture_output=True, text=True, cwd=cwd, timeout=300)
    return r.returncode, r.stdout, r.stderr


def test_generated_broken_pmns_as_dbpmda(tmp_path: Path) -> None:
    require_pcp()
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    files = []
    for k in range(300):
        f = tmp_path / f"p{k}.pmns"
        f.write_text(_broken(rng))
        files.append(f)
    script = "".join(f"namespace {f}\n" for f in files)
    good = tmp_path / "good.pmns"
    good.write_text("\n".join(VALID) + "\n")
    real = _run(["dbpmda", "-f", "-n", str(good)], script, tmp_path)
    ours = _run(pmda_py_argv("dbpmda", "-f", "-n", str(good)), script, tmp_path)
    assert real[2].count("Error Parsing ASCII PMNS") > 50, real[2]  # most of them are broken
    assert ours[1] == real[1], f"seed {seed}"
    assert ours[2] == real[2], f"seed {seed}"
    for f in files[:25]:  # -n FILE: the same lines, and dbpmda's status
        assert _run(pmda_py_argv("dbpmda", "-f", "-n", str(f)), "", tmp_path) == _run(
            ["dbpmda", "-f", "-n", str(f)], "", tmp_path
        ), (f"seed {seed}", f.read_text())
