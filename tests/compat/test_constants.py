"""The shims' constants against the real ``cpmapi``/``cpmda`` modules
(python3-pcp of the system python3): every integer constant the real
modules define must be offered with the same value."""

from __future__ import annotations

import json
import subprocess

from pmda_py.compat.constants import CPMAPI, CPMDA
from tests.compat.harness import SYSTEM_PYTHON, require_binding

_DUMP = """
import json, cpmapi, cpmda
out = {}
for mod in (cpmapi, cpmda):
    out[mod.__name__] = {k: v for k, v in vars(mod).items() if not k.startswith("_") and type(v) is int}
out["pmErrSymDict"] = {str(k): v for k, v in cpmapi.pmErrSymDict.items()}
print(json.dumps(out))
"""


def _real() -> dict[str, dict[str, object]]:
    require_binding()
    r = subprocess.run([SYSTEM_PYTHON, "-c", _DUMP], capture_output=True, text=True, check=True)
    data: dict[str, dict[str, object]] = json.loads(r.stdout)
    return data


def test_cpmapi_constants_match_the_binding() -> None:
    """What a script's ``import cpmapi`` gets, for the installed PCP."""
    real = _real()["cpmapi"]
    ours = CPMAPI
    missing = sorted(set(real) - set(ours))
    wrong = {k: (ours[k], v) for k, v in real.items() if k in ours and ours[k] != v}
    assert not missing, f"cpmapi constants not offered: {missing}"
    assert not wrong, f"cpmapi constants with other values (ours, real): {wrong}"


def test_cpmda_constants_match_the_binding() -> None:
    real = _real()["cpmda"]
    assert {k: CPMDA.get(k) for k in real} == real


def test_error_symbols_match_the_binding() -> None:
    from pmda_py.compat.pmapi import ERR_SYMBOLS

    real = _real()["pmErrSymDict"]
    assert {str(k): v for k, v in ERR_SYMBOLS.items() if str(k) in real} == real
    assert set(real) <= {str(k) for k in ERR_SYMBOLS}
