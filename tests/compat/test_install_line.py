"""The pmcd.conf line ``PYPMDA_COMPAT=NAME ./Install`` writes (the system
test in tests/install/test_compat_swap.py runs the swap itself)."""

from __future__ import annotations

import pytest

from pmda_py.compat.install import compat_line, main

PY = "/var/lib/pcp/pmdas/pypmda-compat-zswap/venv/bin/python"


def test_interpreter_replaced_rest_kept() -> None:
    line = "zswap\t125\tpipe\tbinary\tpython3 /var/lib/pcp/pmdas/zswap/pmdazswap.python"
    assert (
        compat_line(PY, line)
        == f"zswap\t125\tpipe\tbinary\t{PY} -m pmda_py compat /var/lib/pcp/pmdas/zswap/pmdazswap.python"
    )


def test_notready_and_arguments_kept() -> None:
    line = "openmetrics 144 pipe binary notready /usr/bin/python3 /x/pmdaopenmetrics.python -D -r /a"
    assert (
        compat_line(PY, line)
        == f"openmetrics\t144\tpipe\tbinary\tnotready\t{PY} -m pmda_py compat /x/pmdaopenmetrics.python -D -r /a"
    )


@pytest.mark.parametrize(
    "line",
    [
        "sample 29 pipe binary /var/lib/pcp/pmdas/sample/pmdasample -d 29",  # not Python
        "zswap 125 socket inet 4000 python3 x.python",  # not a pipe
        "zswap 125 dso zswap_init /x.so",
        "zswap 125 pipe binary python3",  # no script
    ],
)
def test_refused(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([PY, line]) == 1
    assert capsys.readouterr().err.count("\n") == 1
