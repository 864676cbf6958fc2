"""The import hook that shows a compat script ``pcp``, ``pcp.pmda``,
``pcp.pmapi``, ``cpmapi`` and ``cpmda``.

:func:`install` puts a meta path finder first in ``sys.meta_path`` of the
process ``pmda-py compat`` runs; nothing is added to ``sys.path`` or
installed in the environment, so no other program sees these modules (and a
real python3-pcp, if any, is not the one imported).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence

from pmda_py import pmapi as _p
from pmda_py.compat.constants import CPMAPI, CPMDA

__all__ = ["MODULES", "CompatFinder", "install"]

#: the modules offered, and what each is made of
MODULES = ("pcp", "pcp.pmapi", "pcp.pmda", "cpmapi", "cpmda")


def _cpmapi(mod: types.ModuleType) -> None:
    from pmda_py.compat.pmapi import ERR_SYMBOLS
    from pmda_py.compat.runtime import set_user

    names = vars(mod)
    names.update(CPMAPI)
    names["pmErrSymDict"] = dict(ERR_SYMBOLS)
    names["pmSetProcessIdentity"] = set_user
    names["pmUnits_int"] = lambda ds, dt, dc, ss, st, sc: _p.PmUnits(
        dim_space=ds, dim_time=dt, dim_count=dc, scale_space=ss, scale_time=st, scale_count=sc
    ).to_int()
    names["PM_XTB_SET"] = lambda t: CPMAPI["PM_XTB_FLAG"] | ((t & 0xFF) << 16)
    names["PM_XTB_GET"] = lambda x: ((x & 0xFF0000) >> 16) if x & CPMAPI["PM_XTB_FLAG"] else -1


def _cpmda(mod: types.ModuleType) -> None:
    from pmda_py.compat.agent import AGENT

    names = vars(mod)
    names.update(CPMDA)
    names["set_need_refresh"] = AGENT.need_refresh
    names["pmda_pmid"] = lambda c, i: _p.pmid(AGENT.domain, c, i)
    names["pmda_indom"] = lambda s: _p.indom(AGENT.domain, s)
    names["pmid_build"] = _p.pmid
    names["indom_build"] = _p.indom
    names["pmid_cluster"] = _p.pmid_cluster


def _copy(source: str) -> Callable[[types.ModuleType], None]:
    def fill(mod: types.ModuleType) -> None:
        src = importlib.import_module(source)
        for k, v in vars(src).items():
            if not k.startswith("__"):
                setattr(mod, k, v)
        if source.endswith(".pmapi"):
            vars(mod)["c_api"] = sys.modules.get("cpmapi") or importlib.import_module("cpmapi")

    return fill


def _pcp(mod: types.ModuleType) -> None:
    mod.__path__ = []  # a package: pcp.pmda and pcp.pmapi are found by this finder too


_BUILDERS = {
    "pcp": _pcp,
    "pcp.pmapi": _copy("pmda_py.compat.pmapi"),
    "pcp.pmda": _copy("pmda_py.compat.pmda"),
    "cpmapi": _cpmapi,
    "cpmda": _cpmda,
}


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: types.ModuleType) -> None:
        module.__doc__ = f"{module.__name__} as pmda-py compat offers it (pmda_py.compat)"
        _BUILDERS[module.__name__](module)


class CompatFinder(importlib.abc.MetaPathFinder):
    """Finds the shim modules, and nothing else."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _BUILDERS:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=fullname == "pcp")


def install() -> CompatFinder:
    """Put the finder first (once) and forget any ``pcp`` imported before."""
    for f in sys.meta_path:
        if isinstance(f, CompatFinder):
            return f
    finder = CompatFinder()
    sys.meta_path.insert(0, finder)
    for name in MODULES:
        sys.modules.pop(name, None)
    return finder
