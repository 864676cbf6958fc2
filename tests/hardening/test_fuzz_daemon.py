"""A deterministic slice of the protocol fuzzer, over a pipe and a unix socket
(the long run is ``python -m pmda_py.testing.fuzz --inputs 100000``)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from pmda_py.testing.fuzz import Fuzzer, FuzzFailure, fatal_cases, run_fuzz
from tests.conftest import REPO


@pytest.fixture
def daemon_cmd(tmp_path: Path) -> list[str]:
    (tmp_path / "simple.conf").write_text("sec,min\n")
    cfg = tmp_path / "fz.conf"
    cfg.write_text(
        f"[pmda]\nname = fz\ndomain = 253\npythonpath = {REPO}\n"
        f"[table simple]\nmount = simple\nconfig = {tmp_path / 'simple.conf'}\n"
        "[table control]\nmount = ctl\n[table crash]\ntable = tests.tables.faults:CrashTable\nmount = crash\n"
    )
    return [
        sys.executable,
        "-m",
        "pmda_py",
        "run",
        "-c",
        str(cfg),
        "-l",
        str(tmp_path / "fz.log"),
        "--state-dir",
        str(tmp_path / "state"),
    ]


@pytest.mark.parametrize("seed", [1, 2])
def test_fuzz_slice_pipe(daemon_cmd: list[str], seed: int) -> None:
    res = run_fuzz(daemon_cmd, 3000, seed)
    assert res["replies"] > 1000
    assert res["rss_end_kb"] <= res["rss_start_kb"] * 1.2 + 2048


def test_fuzz_slice_unix_socket(daemon_cmd: list[str], tmp_path: Path) -> None:
    sock = str(tmp_path / "fz.sock")
    res = run_fuzz([*daemon_cmd, "-u", sock], 2000, 5, transport="unix", sock_path=sock)
    assert res["replies"] > 600


@pytest.mark.parametrize("case", fatal_cases(), ids=lambda c: c.kind)
def test_fatal_inputs_close_cleanly(daemon_cmd: list[str], case) -> None:  # type: ignore[no-untyped-def]
    fz = Fuzzer(daemon_cmd)
    fz.expect_close(case)
    assert fz.close() == 0


def test_the_fuzzer_catches_a_pmda_that_does_not_answer(tmp_path: Path) -> None:
    """The checks can fail: a PMDA that never answers DESC_REQ is reported as hung."""
    bad = tmp_path / "bad_pmda.py"
    bad.write_text(
        "import os, struct, sys\n"
        "os.write(1, struct.pack('!iiiiI', 20, 0x700c, os.getpid(), 1, 0x01020000))\n"
        "while True:\n"
        "    h = os.read(0, 12)\n"
        "    if len(h) < 12: break\n"
        "    n = struct.unpack('!i', h[:4])[0]\n"
        "    if n > 12: os.read(0, n - 12)\n"
    )
    fz = Fuzzer([sys.executable, str(bad)], timeout=1.0)
    import random

    with pytest.raises(FuzzFailure, match="hangs"):
        fz.run_batch([], random.Random(0), 0)
    fz.proc.kill()
    fz.proc.wait()


def test_the_command_line_runs_and_reports(
    daemon_cmd: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m pmda_py.testing.fuzz``: the counts, then the fatal inputs each closing
    the channel; over a unix socket with --transport unix --socket."""
    from pmda_py.testing.fuzz import main

    assert main(["--inputs", "200", "--seed", "3", "--", *daemon_cmd]) == 0
    out = capsys.readouterr().out
    assert int(next(ln for ln in out.splitlines() if ln.startswith("replies: ")).split()[1]) > 50
    for case in fatal_cases():
        assert f"fatal input '{case.kind}': clean close\n" in out
    sock = str(tmp_path / "cli.sock")
    assert main(["--inputs", "100", "--transport", "unix", "--socket", sock, "--", *daemon_cmd, "-u", sock]) == 0
    assert "replies: " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        (
            ["--", "/nonexistent/pmda"],
            1,
            "python -m pmda_py.testing.fuzz: /nonexistent/pmda: No such file or directory",
        ),
        (["--", sys.executable, "-c", "pass"], 1, "FAIL: the PMDA closed its channel before sending CREDS"),
        (["--transport", "unix", "--", "true"], 2, "--transport unix needs --socket PATH"),
        (["--inputs", "-1", "--", "true"], 2, "--inputs -1: not a count"),
    ],
    ids=["no-such-command", "exits-at-once", "unix-without-socket", "negative-inputs"],
)
def test_a_mistake_is_one_line(args: list[str], status: int, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pmda_py.testing.fuzz import main

    if status == 2:
        with pytest.raises(SystemExit) as exc:
            main(args)
        assert exc.value.code == 2
    else:
        assert main(args) == status
    err = capsys.readouterr().err
    assert err.splitlines()[-1].endswith(says) and "Traceback" not in err, err


@pytest.mark.parametrize("domain", [253, 300, 2])
def test_domain_is_the_domain_of_the_generated_requests(domain: int) -> None:
    """``--domain``: the valid requests the fuzzer makes (before mutation)
    ask about instance domains of that domain, and PMIDs of it (mixed with
    random ones, on purpose)."""
    from pmda_py.pmapi import PM_INDOM_NULL
    from pmda_py.testing.fuzz import generate
    from pmda_py.wire import DescReqPdu, FetchPdu, InstanceReqPdu, PduReader

    indoms: list[int] = []
    pmids: list[int] = []
    for seed in range(400):
        case = generate(random.Random(seed), domain)
        if case.kind != "valid":
            continue
        reader = PduReader()
        reader.receive_data(case.data)
        pdu = reader.next_pdu()
        if isinstance(pdu, FetchPdu):
            pmids += pdu.pmids
        elif isinstance(pdu, DescReqPdu):
            pmids.append(pdu.pmid)
        elif isinstance(pdu, InstanceReqPdu) and pdu.indom != PM_INDOM_NULL:
            indoms.append(pdu.indom)
    assert len(indoms) > 5 and {(i >> 22) & 0x1FF for i in indoms} == {domain}
    ours = [p for p in pmids if (p >> 22) & 0x1FF == domain]
    assert len(pmids) > 20 and len(ours) > len(pmids) / 2, (len(ours), len(pmids))


def test_the_domain_option_reaches_the_generator(
    daemon_cmd: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--domain 300`` against an agent at domain 300: every input is made
    for that domain, and the run passes."""
    from pmda_py.testing import fuzz

    asked: list[int] = []
    real = fuzz.generate

    def recording(rng: random.Random, domain: int = 253) -> fuzz.Case:
        asked.append(domain)
        return real(rng, domain)

    monkeypatch.setattr(fuzz, "generate", recording)
    assert fuzz.main(["--inputs", "60", "--domain", "300", "--", *daemon_cmd, "-d", "300"]) == 0
    assert len(asked) == 60 and set(asked) == {300}
    assert "replies: " in capsys.readouterr().out
