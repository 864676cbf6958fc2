"""Differential testing of ``pmda-py dbpmda`` against real dbpmda.

:func:`generate` writes a script of dbpmda lines from a seed: valid commands
with random arguments, arguments of the wrong kind, missing and extra tokens,
odd spacing, comments and quotes.  :func:`compare` runs it through real
dbpmda and ``pmda-py dbpmda`` (each starting its own PMDA: PCP's pmdasample,
or our daemon serving the simple table) and compares stdout and stderr after
masking what changes from run to run (addresses, pids, times).

Used by tests/dbpmda/test_differential.py (a fixed corpus of seeds) and by
scripts/dbpmda_diff.py (a longer random run with a report).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pmda_py.testing.dbpmda.format import DEBUG_FLAGS
from pmda_py.testing.support import pmda_py_argv, pmda_py_line
from tests.integration.pcpbed import SAMPLE, mask_simple_times, private_pmdas

SAMPLE_PMNS = "/var/lib/pcp/pmdas/sample/root"
SIMPLE_PMNS = "/var/lib/pcp/pmdas/simple/root"

# metrics whose values do not change with time (or change the same way in both runs)
SAMPLE_METRICS = [
    "sample.long.one",
    "sample.long.ten",
    "sample.long.million",
    "sample.long.write_me",
    "sample.ulong.hundred",
    "sample.ulong.write_me",
    "sample.longlong.million",
    "sample.longlong.write_me",
    "sample.ulonglong.one",
    "sample.ulonglong.write_me",
    "sample.float.ten",
    "sample.float.write_me",
    "sample.double.one",
    "sample.double.write_me",
    "sample.string.hullo",
    "sample.string.null",
    "sample.string.write_me",
    "sample.aggregate.hullo",
    "sample.aggregate.write_me",
    "sample.colour",
    "sample.bin",
    "sample.bucket",
    "sample.part_bin",
    "sample.bogus_bin",
    "sample.noinst",
    "sample.write_me",
    "sample.dupnames.two.float",
    "sample.bad.unknown",
    "sample.bad.nosupport",
    "sample.bad.novalues",
    "sample.secret.foo.bar.three",
    "sample.secret.foo.one",
    "sample.ulong.count.base",
    "sample.long.bin",
    "sample.negative.instant.m_32",
    "sample.dynamic.counter",
    "sample.many.int",
]
SIMPLE_METRICS = ["simple.numfetch", "simple.color", "simple.time.user", "simple.time.sys", "simple.now"]
BOGUS_METRICS = ["sample.nonesuch", "sample", "sample.secret", "simple.nonesuch", "sampledso.long.one", "x.y.z"]
PMIDS = [
    "29.0.5",
    "29.0.6",
    "29.0.10",
    "29.0.9999",
    "0.5",
    "5",
    "1.2.3",
    "29.0.1009",
    "253.0.1",
    "0x10",
    "4294967295",
    "99999999999",
    "511.0.0",
    "29.4095.1023",
]
INDOMS = ["29.1", "29.2", "29.3", "29.7", "29.99", "253.0", "253.1", "1", "0", "-1", "7.7", "0x3"]
INSTS = ["0", "1", "100", "300", "9999", "-1", "red", '"red"', '"bin-100"', "'green'", "x", '"no such"']
STORE_VALUES = [
    '"42"',
    '"-1"',
    '"99999999999"',
    '"1.5"',
    '"abc"',
    '"1e400"',
    '" 7"',
    '"7 "',
    '"0x10"',
    '"-99999999999999999999"',
    '"hello world"',
    "'3'",
    "42",
    '"18446744073709551615"',
    '"inf"',
    '"1e-320"',
    '"+5"',
]
ATTRS = ["1", "5", "14", "99", '"username"', '"container"', '"nonesuch"', "username"]
FLAGS = ["pdu", "appl0", "-appl0", "nonesuch", "3", "fetch", "indom", "labels", "-nonesuch", "0"]
JUNK = [
    "extra",
    "42",
    "1.2",
    "1.2.3",
    '"str"',
    "'s'",
    ",",
    "=",
    "+",
    "$m",
    "-x",
    "@",
    "on",
    "all",
    "indom",
    "#c",
    '"unterminated',
    "''",
    "0xzz",
    "1.2.x",
    "-",
]


_JUNK_CHARS = "abcdeflmnopqstx019.,-+=$#\"' \t@_/:?"
_OPENS = [
    "open dso /nonexistent.so init 29",
    "open dso foo bar",
    "open socket unix /nonexistent",
    "open socket inet 1",
    "open socket ipv6 1",
    "open pipe /nonexistent x",
    "open socket foo",
    'open socket inet "nosuchservice"',
    "open socket",
    "open pipe",
    "open",
]
_SETS_DEBUG = re.compile(r"-?(?:[0-9][0-9.xX]*|all|" + "|".join(DEBUG_FLAGS) + r")")


def _metric(r: random.Random, simple: bool) -> str:
    k = r.random()
    if k < 0.6:
        return r.choice(SIMPLE_METRICS if simple and r.random() < 0.8 else SAMPLE_METRICS)
    if k < 0.8:
        return r.choice(PMIDS)
    return r.choice(BOGUS_METRICS)


def _valid(r: random.Random, simple: bool) -> list[str]:
    """A command with random (mostly right-kind) arguments, as tokens."""

    def m() -> str:
        return _metric(r, simple)

    choices: list[list[str]] = [
        ["desc", m()],
        ["fetch", *[m() for _ in range(r.randint(1, 3))]],
        ["fetch", m(), ",", m()],
        ["store", m(), r.choice(STORE_VALUES)],
        ["text", m()],
        ["text", "indom", r.choice(INDOMS)],
        ["instance", r.choice(INDOMS)],
        ["instance", r.choice(INDOMS), r.choice(INSTS)],
        ["profile", r.choice(INDOMS), r.choice(["all", "none"])],
        ["profile", r.choice(INDOMS), r.choice(["add", "delete"]), r.choice(["0", "1", "100", "7"])],
        ["label", r.choice(["context", "domain"])],
        ["label", "indom", r.choice(INDOMS)],
        ["label", "instances", r.choice(INDOMS)],
        ["label", "cluster", r.choice(["29.0", "29.1", "253.0", "1", "29.0.1"])],
        ["label", "item", m()],
        ["name", r.choice(PMIDS)],
        ["pmid", r.choice(SAMPLE_METRICS + BOGUS_METRICS)],
        ["children", r.choice(["sample", "sample.secret", "sample.secret.foo", "simple", "sample.long", "x"])],
        ["traverse", r.choice(["sample.secret", "sample.secret.foo.bar", "simple", "sample.long.one"])],
        ["attr", r.choice(ATTRS)],
        ["attr", r.choice(ATTRS), r.choice(['"x"', '"12345"', "x"])],
        ["getdesc", r.choice(["on", "off"])],
        ["getiname", r.choice(["on", "off"])],
        ["help"],
        ["help", r.choice(["desc", "fetch", "store", "text", "attr", "label", "open", "q", "nonesuch", "?"])],
        ["status"],
        ["debug", r.choice(["none", "nonesuch", "-nonesuch", "none x"])],
        ["wait", r.choice(["0", "0.01", "-1", "x"])],
        [
            r.choice(
                [
                    "desc",
                    "fetch",
                    "store",
                    "text",
                    "instance",
                    "profile",
                    "label",
                    "name",
                    "pmid",
                    "children",
                    "traverse",
                    "attr",
                    "getdesc",
                    "getiname",
                    "timer",
                    "wait",
                    "debug",
                    "open",
                    "watch",
                ]
            )
        ],
        ["close"] if r.random() < 0.2 else ["status"],
        ["namespace", r.choice(["/nonexistent/root", SAMPLE_PMNS])] if r.random() < 0.2 else ["help", "status"],
        [r.choice(["bogus", "descx", "q2", "Desc", "?x", "exitnow"]), *([m()] if r.random() < 0.5 else [])],
    ]
    return r.choice(choices)


def _mutate(r: random.Random, toks: list[str]) -> list[str]:
    k = r.random()
    toks = list(toks)
    if k < 0.25 and len(toks) > 1:  # wrong kind of argument
        toks[r.randrange(1, len(toks))] = r.choice(JUNK + PMIDS + INDOMS)
    elif k < 0.45 and len(toks) > 1:  # missing token
        del toks[r.randrange(1, len(toks))]
    elif k < 0.7:  # extra token
        toks.insert(r.randint(1, len(toks)), r.choice(JUNK))
    else:  # a quote or a comma in the wrong place
        toks.append(r.choice(['"', "'", ",", '"x" "y"', "# trailing comment", "\t"]))
    return toks


def _spacing(r: random.Random, toks: list[str]) -> str:
    if r.random() < 0.7:
        return " ".join(toks)
    seps = [" ", "  ", "\t", " \t ", "   "]
    lead = r.choice(["", " ", "\t", "  "])
    trail = r.choice(["", " ", "\t", "  # comment"])
    return lead + "".join(t + r.choice(seps) for t in toks[:-1]) + toks[-1] + trail


def generate(seed: int, lines: int = 12, simple: bool | None = None) -> tuple[str, bool]:
    """A script of ``lines`` lines (the first opens the PMDA) and whether it
    drives our daemon (simple) rather than pmdasample."""
    r = random.Random(seed)
    if simple is None:
        simple = r.random() < 0.25
    out: list[str] = ["{open}"]
    while len(out) < lines:
        k = r.random()
        if k < 0.04:
            out.append(r.choice(["", "# a comment", "   # indented comment", "\t"]))
            continue
        if k < 0.09:  # anything at all, from the characters that matter to the scanner
            out.append("".join(r.choice(_JUNK_CHARS) for _ in range(r.randint(1, 30))).replace("wait", "w"))
            continue
        if k < 0.11:  # PMDAs that are not there
            out.append(r.choice(_OPENS))
            continue
        toks = _valid(r, simple)
        if k >= 0.55:
            toks = _mutate(r, toks)
        if "wait" in toks:  # no long sleeps: "wait N" sleeps N seconds
            toks = [t if not re.fullmatch(r"[0-9]+|0[xX][0-9]+", t) else "0" for t in toks]
        if "debug" in toks:  # flags would turn on libpcp's diagnostics in real dbpmda (not imitated)
            toks = [t if t == "debug" or not _SETS_DEBUG.fullmatch(t.strip("\"'")) else "nonesuch" for t in toks]
        out.append(_spacing(r, toks))
    return "\n".join(out) + "\n", simple


def mask(text: str) -> str:
    """What changes between runs: addresses, pids, times."""
    text = re.sub(r"dump from 0x[0-9a-f]+", "dump from ADDR", text)
    text = re.sub(r"timestamps? [0-9:.]+(\.\.\.[0-9:.]+)?\]", "timestamp TS]", text)
    text = re.sub(r"(?m)^(Connection: +daemon \(pid: )\d+\)$", r"\1PID)", text)
    text = re.sub(r"(?m)^Timer: \d+\.\d+ seconds$", "Timer: T seconds", text)
    text = re.sub(r"(-l |PMDA: )\S+/(\w+\.log)", r"\1LOGDIR/\2", text)
    text = re.sub(r"--state-dir \S+", "--state-dir STATE", text)
    # the old value in a store dialogue of the simple metrics that follow the clock
    text = re.sub(r"(?m)^(253\.(?:1\.[23]|2\.4)(?: \[\d+\])?: )\S+ ->", r"\1OLD ->", text)
    return mask_simple_times(text)


@dataclass
class Outcome:
    seed: int
    script: str
    real: tuple[str, str]
    ours: tuple[str, str]
    traceback: bool = False
    categories: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return self.real == self.ours


class Bed:
    """A private PCP_PMDAS_DIR (compiled help) for the PMDAs of the runs."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pmda_py-dbpmda-diff-"))
        self.root.chmod(0o755)
        self.pmdas = private_pmdas(self.root)
        self.env = {**os.environ, "PCP_PMDAS_DIR": str(self.pmdas)}
        self.n = 0

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _open_line(self, simple: bool, who: str) -> tuple[str, str]:
        self.n += 1
        d = self.root / f"run{self.n}-{who}"
        d.mkdir()
        d.chmod(0o777)
        if simple:
            cmd = "open pipe " + pmda_py_line(
                "run", "-d", "253", "--table", "simple=simple", "-l", f"{d}/simple.log", "--state-dir", d
            )
            return cmd, SIMPLE_PMNS
        return f"open pipe {SAMPLE} -d 29 -l {d}/sample.log", SAMPLE_PMNS

    def run(self, cmd: list[str], script: str, simple: bool, who: str) -> tuple[str, str]:
        open_line, pmns = self._open_line(simple, who)
        try:
            r = subprocess.run(
                [*cmd, "-e", "-n", pmns],
                input=script.replace("{open}", open_line, 1),
                capture_output=True,
                text=True,
                env=self.env,
                timeout=30,
                errors="replace",
            )
        except subprocess.TimeoutExpired:
            return "TIMEOUT", "TIMEOUT"
        return mask(r.stdout), mask(r.stderr)

    def compare(self, seed: int, lines: int = 12) -> Outcome:
        script, simple = generate(seed, lines)
        real = self.run(["dbpmda"], script, simple, "real")
        ours = self.run(pmda_py_argv("dbpmda"), script, simple, "ours")
        out = Outcome(seed, script, real, ours, traceback="Traceback (most recent call last)" in ours[1])
        if not out.same:
            out.categories = categorise(real, ours)
        return out


def _first_diff(a: str, b: str) -> tuple[int, list[str], list[str]]:
    la, lb = a.splitlines(), b.splitlines()
    for i in range(max(len(la), len(lb))):
        if i >= len(la) or i >= len(lb) or la[i] != lb[i]:
            return i, la, lb
    return -1, la, lb


LIBPCP_DEBUG = re.compile(r"(?m)^(\[\d+\]pm\w+: .*|\d{3}: .*)\n")


def without_libpcp_debug(text: str) -> str:
    """Real dbpmda's stderr less libpcp's diagnostics (``debug pdu`` etc.
    turn them on in the real one; pmda-py dbpmda keeps the flags for
    ``status`` only)."""
    return LIBPCP_DEBUG.sub("", text)


def categorise(real: tuple[str, str], ours: tuple[str, str]) -> list[str]:
    """Name each difference by its stream, the script line it follows and
    the first line that differs (numbers masked so like ones group)."""
    if real[0] == ours[0] and real[1] != ours[1] and without_libpcp_debug(real[1]) == ours[1]:
        return ["stderr: libpcp debug output (a debug flag was set)"]
    cats = []
    for stream, a, b in (("stdout", real[0], ours[0]), ("stderr", real[1], ours[1])):
        if a == b:
            continue
        i, la, lb = _first_diff(a, b)
        ra = la[i] if i < len(la) else "<none>"
        rb = lb[i] if i < len(lb) else "<none>"
        cmd = ""
        if stream == "stdout":
            for ln in reversed(la[:i]):
                if ln and not ln.startswith((" ", "\t", "[", "Error", "PMID", "Warning")):
                    cmd = ln.split()[0] if ln.split() else ""
                    break
        shape = re.sub(r"\d+", "N", f"{ra[:50]!r} vs {rb[:50]!r}")
        cats.append(f"{stream} after {cmd or '?'}: {shape}")
    return cats
