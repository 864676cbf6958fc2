"""``pcp.pmda`` as PMDA scripts use it, on pmda_py's engine.

The same names and call shapes as PCP's binding: ``PMDA`` (a subclass of
``MetricDispatch``) with its ``set_*`` callbacks, ``add_metric`` and
friends, ``pmdaMetric``/``pmdaIndom``/``pmdaInstid``/``pmdaUnits`` as
ctypes structures (scripts build them and read their fields), list and
dict instance domains.  Differences from the binding are deliberate and
listed in docs/compat.md ("Running pcp.pmda PMDAs"): lookups by instance are
dictionary lookups, a bad callback return leaves nothing behind, and
``run()`` serves pmcd from pmda_py's dispatcher.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from ctypes import POINTER, Structure, addressof, c_char_p, c_int, c_void_p
from typing import Union

import structlog

from pmda_py import pmapi as _p
from pmda_py.compat.agent import AGENT, Callback
from pmda_py.compat.cache import IndomCache
from pmda_py.compat.constants import CPMAPI
from pmda_py.compat.pmapi import pmContext, pmDesc, pmErr, pmInDom, pmLabelSet, pmUnits, set_progname

__all__ = [
    "MetricDispatch",
    "PMDA",
    "pmdaAddLabelFlags",
    "pmdaAddLabels",
    "pmdaAddNotes",
    "pmdaGetContext",
    "pmdaIndom",
    "pmdaInstid",
    "pmdaMetric",
    "pmdaUnits",
]

log = structlog.get_logger("pmda_py.compat.pmda")


def pmdaGetContext() -> int:
    """The client context of the request being served."""
    return AGENT.context


def pmdaAddLabels(label: str | bytes) -> str | bytes:
    """Labels are JSON text under pmda-py compat: the text back, checked."""
    import json

    try:
        json.loads(label)
    except ValueError:
        raise pmErr(CPMAPI["PM_ERR_FAULT"], "bad label JSON") from None
    return label


def pmdaAddNotes(label: str | bytes) -> str | bytes:
    return pmdaAddLabels(label)


def pmdaAddLabelFlags(labels: object, flags: int) -> int:
    return 0


class pmdaMetric(Structure):
    """A metric's descriptor for ``add_metric`` (``m_desc`` is a pmDesc)."""

    _fields_ = [("m_user", c_void_p), ("m_desc", pmDesc)]

    def __init__(self, pmid: int, typeof: int, indom: int, sem: int, units: pmUnits) -> None:
        super().__init__()
        self.m_user = None
        self.m_desc.pmid = pmid
        self.m_desc.type = typeof
        self.m_desc.indom = indom
        self.m_desc.sem = sem
        self.m_desc.units = units  # a pmUnits, as the binding insists (TypeError otherwise)

    def __str__(self) -> str:
        return f"pmdaMetric@{addressof(self):#x} pmid={self.m_desc.pmid:#x} type={self.m_desc.type}"


class pmdaInstid(Structure):
    """One instance of a list indom: ``i_inst`` and ``i_name`` (UTF-8 bytes)."""

    _fields_ = [("i_inst", c_int), ("i_name", c_char_p)]

    def __init__(self, instid: int, name: str) -> None:
        super().__init__()
        self.i_inst = instid
        self.i_name = name.encode("utf-8")

    def __str__(self) -> str:
        return f"pmdaInstid@{addressof(self):#x} index={self.i_inst} name={self.i_name!r}"


#: what an indom's instances may be given as: pmdaInstid structures (an array
#: indom), a dict ``{name: value}`` (a cache indom; each value the script's,
#: handed back by ``inst_lookup``) or None (not decided yet)
Insts = Union[Iterable[pmdaInstid], dict[str, object], None]


class pmdaIndom(Structure):
    """An instance domain: a list of pmdaInstid (an array indom), a dict
    ``{name: ctypes value}`` (a cache indom, ``it_numinst == -1``) or None
    (not decided yet)."""

    _fields_ = [("it_indom", pmInDom), ("it_numinst", c_int), ("it_set", POINTER(pmdaInstid))]
    it_set: ctypes._Pointer[pmdaInstid] | None

    def __init__(self, indom: int, insts: Insts) -> None:
        super().__init__()
        self.it_numinst = 0
        self.it_set = None
        self.it_indom = indom
        self._names: dict[int, str] = {}
        #: ``_names`` while the indom is not a cache indom (``it_numinst``
        #: >= 0), else None: what a lookup reads without a ctypes field
        self._list_names: dict[int, str] | None = self._names
        self._order: list[tuple[int, str]] = []
        self._array: ctypes.Array[pmdaInstid] | None = None
        self.load_indom(indom, insts)
        self.set_instances(indom, insts)

    def __iter__(self) -> Iterator[tuple[int, str]]:
        """The script's own walk, as the binding's: an indom of no entries
        (None or []) walks the dict indom cache of its number; an array
        indom's ids each come with the name of the id's first entry; an
        instance whose name is empty is left out."""
        if self.it_numinst <= 0:
            cache = AGENT.cache(self.it_indom)
            for inst, _ in cache.listing():
                name = cache.name_of(inst)
                if name:
                    yield inst, name
            return
        for inst, _ in self._order:
            name = self._names.get(inst)
            if name:
                yield inst, name

    def listing(self) -> list[tuple[int, str]]:
        """``(inst, name)`` in the order libpcp_pmda walks them."""
        if self.it_numinst < 0:
            return AGENT.cache(self.it_indom).listing()
        return list(self._order)

    def list_token(self) -> object | None:
        """The same object while a list indom's instances stay the same
        (``set_list_instances`` makes a new one); None for a cache indom,
        whose instances are read each time."""
        return self._order if self.it_numinst >= 0 else None

    def inst_name_lookup(self, instance: int) -> str | None:
        names = self._list_names
        if names is None:
            return AGENT.cache(self.it_indom).name_of(instance)
        return names.get(instance)

    def load_indom(self, indom: int, insts: Insts) -> None:
        if isinstance(insts, dict):
            AGENT.cache(indom).load()

    def load(self) -> None:
        if self.it_numinst == -1:
            AGENT.cache(self.it_indom).load()

    def set_list_instances(self, insts: list[pmdaInstid]) -> None:
        array = (pmdaInstid * len(insts))()
        for k, i in enumerate(insts):
            array[k].i_inst = i.i_inst
            array[k].i_name = i.i_name
        self._array = array
        self.it_set = ctypes.cast(array, POINTER(pmdaInstid))
        self.it_numinst = len(insts)
        self._order = [(i.i_inst, (i.i_name or b"").decode("utf-8", "replace")) for i in insts]
        self._names = {}
        for inst, name in self._order:
            self._names.setdefault(inst, name)
        self._list_names = self._names
        AGENT.need_refresh()

    def set_dict_instances(self, indom: int, insts: Mapping[str, object]) -> None:
        AGENT.cache(indom).replace(insts)
        self.it_numinst = -1
        self._list_names = None

    def set_instances(self, indom: int, insts: Insts) -> None:
        if insts is None:
            self.it_numinst = 0
            self._list_names = self._names
        elif isinstance(insts, dict):
            self.it_numinst = -1
            self._list_names = None
            self.set_dict_instances(indom, insts)
        else:
            self.set_list_instances(list(insts))

    def __str__(self) -> str:
        return f"pmdaIndom@{addressof(self):#x} indom={self.it_indom:#x} num={self.it_numinst}"

    def _cache_only(self) -> IndomCache:
        if self.it_numinst > 0:
            raise pmErr(CPMAPI["PM_ERR_NYI"])
        return AGENT.cache(self.it_indom)

    def cache_load(self) -> None:
        self._cache_only().load()

    def cache_mark_active(self) -> None:
        self._cache_only().mark_active()

    def cache_mark_inactive(self) -> None:
        self._cache_only().mark_inactive()

    def cache_resize(self, maximum: int) -> None:
        """pmdaCacheResize: new ids stay at or below ``maximum`` (a C int,
        wrapped as the binding's ctypes call wraps it); PM_ERR_SIGN below 0,
        PM_ERR_TOOBIG below an id in use, PM_ERR_NYI for a list indom."""
        maximum = (int(maximum) + 0x80000000) % 0x100000000 - 0x80000000  # a ctypes c_int wraps, unchecked
        sts = self._cache_only().resize(maximum)
        if sts < 0:
            raise pmErr(sts)


class pmdaUnits(pmUnits):
    """``pmUnits`` under the name PMDAs import from pcp.pmda."""

    def __init__(self, dimS: int, dimT: int, dimC: int, scaleS: int, scaleT: int, scaleC: int) -> None:
        super().__init__(dimS, dimT, dimC, scaleS, scaleT, scaleC)


class MetricDispatch:
    """The metric and indom tables of a PMDA, and their help texts."""

    def __init__(self, domain: int, name: str, logfile: str, helpfile: str) -> None:
        self._indomtable: list[pmdaIndom] = []
        self._indoms: dict[int, pmdaIndom] = {}
        self._indom_oneline: dict[int, str] = {}
        self._indom_helptext: dict[int, str] = {}
        self._metrictable: list[pmdaMetric] = []
        self._metrics: dict[int, pmdaMetric] = {}
        self._metric_names: dict[int, str] = {}
        self._metric_names_map: dict[str, int] = {}
        self._metric_oneline: dict[int, str] = {}
        self._metric_helptext: dict[int, str] = {}
        _init_dispatch(self, domain, name, logfile, helpfile)

    def clear_indoms(self) -> None:
        del self._indomtable[:]
        self._indoms.clear()
        self._indom_oneline.clear()
        self._indom_helptext.clear()
        AGENT.need_refresh()

    def clear_metrics(self) -> None:
        del self._metrictable[:]
        self._metrics.clear()
        self._metric_names.clear()
        self._metric_names_map.clear()
        self._metric_oneline.clear()
        self._metric_helptext.clear()
        AGENT.need_refresh()

    def reset_metrics(self) -> None:
        self.clear_metrics()

    def pmns_refresh(self) -> None:
        AGENT.need_refresh()

    def connect_pmcd(self) -> None:
        AGENT.connect()

    def add_metric(self, name: str, metric: pmdaMetric, oneline: str = "", text: str = "") -> None:
        pmid = metric.m_desc.pmid
        if name in self._metric_names_map:
            raise KeyError(f"attempt to add_metric with an existing name={name}")
        if pmid in self._metrics:
            raise KeyError("attempt to add_metric with an existing PMID")
        self._metrictable.append(metric)
        self._metrics[pmid] = metric
        self._metric_names[pmid] = name
        self._metric_names_map[name] = pmid
        self._metric_oneline[pmid] = oneline
        self._metric_helptext[pmid] = text
        AGENT.need_refresh()

    def remove_metric(self, name: str, metric: pmdaMetric) -> None:
        pmid = metric.m_desc.pmid
        if name not in self._metric_names_map:
            raise KeyError(f"attempt to remove non-existant metric name={name}")
        if pmid not in self._metrics:
            raise KeyError("attempt to remove_metric with non-existant PMID")
        self._metrictable.remove(metric)
        for d in (self._metrics, self._metric_names, self._metric_oneline, self._metric_helptext):
            d.pop(pmid)
        self._metric_names_map.pop(name)
        AGENT.need_refresh()

    def add_indom(self, indom: pmdaIndom, oneline: str = "", text: str = "") -> None:
        indomid = indom.it_indom
        if any(e.it_indom == indomid for e in self._indomtable):
            raise KeyError("attempt to add_indom with an existing ID")
        self._indomtable.append(indom)
        self._indoms[indomid] = indom
        self._indom_oneline[indomid] = oneline
        self._indom_helptext[indomid] = text
        AGENT.need_refresh()

    def replace_indom(self, indom: pmdaIndom | int, insts: Insts) -> None:
        if isinstance(indom, pmdaIndom):
            it_indom, replacement = indom.it_indom, indom
        else:
            it_indom, replacement = indom, pmdaIndom(indom, insts)
        if isinstance(insts, list):
            for k, entry in enumerate(self._indomtable):
                if entry.it_indom == it_indom:
                    self._indomtable[k] = replacement
                    break
        self._indoms[it_indom] = replacement

    def inst_lookup(self, indom: int, instance: int) -> object:
        """The value stored with an active instance of a dict indom, as a
        ``c_void_p`` to it (``ctypes.cast`` it as with the binding); None
        for a list indom or an unknown instance.  Constant time."""
        entry = self._indoms[indom]
        if entry.it_numinst < 0:
            c = AGENT.cache(indom)
            if instance in c.active:
                value = c.values.get(instance)
                if isinstance(value, (ctypes._SimpleCData, Structure, ctypes.Array)):
                    return c_void_p(addressof(value))
                return value
        return None

    def inst_name_lookup(self, indom: int, instance: int) -> str | None:
        """The name of an instance (constant time)."""
        entry = self._indoms[indom]
        names = entry._list_names  # a list indom's names, read in place (this is called per value)
        return names.get(instance) if names is not None else entry.inst_name_lookup(instance)

    def pmid_name_lookup(self, cluster: int, item: int) -> str | None:
        return self._metric_names.get(_p.pmid(AGENT.domain, cluster, item))


def _init_dispatch(pmda: MetricDispatch, domain: int, name: str, logfile: str, helpfile: str) -> None:
    """What the binding's init_dispatch does: name the process, note the
    domain, open the log (not in the Install-time modes)."""
    from pmda_py.compat.agent import generating

    AGENT.domain, AGENT.pmdaname, AGENT.logfile, AGENT.helpfile = domain, name, logfile, helpfile
    AGENT.pmda = pmda
    set_progname(name)
    if not generating():
        from pmda_py.compat.runtime import open_log

        open_log(logfile)


class PMDA(MetricDispatch):
    """A performance metrics domain agent: ``PMDA(name, domain)``, then
    ``add_metric``/``add_indom``/``set_*`` and ``run()``."""

    def __init__(self, name: str, domain: int, logfile: str | None = None, helpfile: str | None = None) -> None:
        self._name = name
        self._domain = domain
        AGENT.name = name
        if not logfile:
            logfile = name + ".log"
        if not helpfile:
            helpfile = f"{pmContext.pmGetConfig('PCP_PMDAS_DIR')}/{name}/help"
        super().__init__(domain, "pmda" + name, logfile, helpfile)

    def read_name(self) -> str:
        """The PMDA's name (what the ``name`` property reads)."""
        return self._name

    def read_domain(self) -> int:
        """The PMDA's domain (what the ``domain`` property reads)."""
        return self._domain

    name = property(read_name)
    domain = property(read_domain)

    def domain_write(self) -> None:
        print(f"#define {self._name.upper()} {self._domain}")

    def pmns_write(self, root: str) -> None:
        prefixes = {n.split(".")[0] for n in self._metric_names.values()}
        lead = "\t" if root == "root" else ""
        if lead:
            print("root {")
        for prefix in prefixes:
            print(f"{lead}{prefix}\t{self._domain}:*:*")
        if lead:
            print("}")

    def pmda_notready(self) -> None:
        AGENT.notready()

    def pmda_ready(self) -> None:
        AGENT.ready()

    def run(self) -> None:
        if "PCP_PYTHON_DOMAIN" in os.environ:
            self.domain_write()
        elif "PCP_PYTHON_PMNS" in os.environ:
            self.pmns_write(os.environ["PCP_PYTHON_PMNS"])
        elif "PCP_PYTHON_PROBE" in os.environ:
            probe = getattr(self, "domain_probe", None)
            sys.exit(int(probe()) if probe else 0)
        else:
            from pmda_py.compat.runtime import serve

            serve(self)

    # the callbacks (static methods, as in the binding: one set per process)

    @staticmethod
    def set_fetch(fetch: Callback) -> None:
        AGENT.callbacks["fetch"] = fetch

    @staticmethod
    def set_label(label: Callback) -> None:
        AGENT.callbacks["label"] = label

    @staticmethod
    def set_notes(notes: Callback) -> None:
        AGENT.callbacks["notes"] = notes

    @staticmethod
    def set_refresh(refresh: Callback) -> None:
        AGENT.callbacks["refresh"] = refresh

    @staticmethod
    def set_instance(instance: Callback) -> None:
        AGENT.callbacks["instance"] = instance

    @staticmethod
    def set_fetch_callback(fetch_callback: Callback) -> None:
        AGENT.callbacks["fetch_callback"] = fetch_callback

    @staticmethod
    def set_label_callback(label_callback: Callback) -> None:
        AGENT.callbacks["label_callback"] = label_callback

    @staticmethod
    def set_notes_callback(notes_callback: Callback) -> None:
        AGENT.callbacks["notes_callback"] = notes_callback

    @staticmethod
    def set_attribute_callback(attribute_callback: Callback) -> None:
        AGENT.callbacks["attribute_callback"] = attribute_callback

    @staticmethod
    def set_store_callback(store_callback: Callback) -> None:
        AGENT.callbacks["store_callback"] = store_callback

    @staticmethod
    def set_endcontext_callback(endcontext_callback: Callback) -> None:
        AGENT.callbacks["endcontext_callback"] = endcontext_callback

    @staticmethod
    def set_refresh_all(refresh_all: Callback) -> None:
        AGENT.callbacks["refresh_all"] = refresh_all

    @staticmethod
    def set_refresh_metrics(refresh_metrics: Callback) -> None:
        AGENT.callbacks["refresh_metrics"] = refresh_metrics

    @staticmethod
    def set_notify_change() -> None:
        """Clients learn at the next fetch that names and labels changed."""
        AGENT.notify_change = True

    @staticmethod
    def set_comm_flags(flags: int) -> None:
        AGENT.comm_flags = int(flags)

    @staticmethod
    def set_user(username: str) -> int:
        from pmda_py.compat.runtime import set_user

        return set_user(username)

    @staticmethod
    def pmid(cluster: int, item: int) -> int:
        return _p.pmid(AGENT.domain, cluster, item)

    @staticmethod
    def pmid_build(domain: int, cluster: int, item: int) -> int:
        return _p.pmid(domain, cluster, item)

    @staticmethod
    def pmid_cluster(pmid: int) -> int:
        return _p.pmid_cluster(pmid)

    @staticmethod
    def indom(serial: int) -> int:
        return ((AGENT.domain & 0x1FF) << 22) | (serial & 0x3FFFFF)  # pmapi.indom, inlined: called per value

    @staticmethod
    def indom_build(domain: int, serial: int) -> int:
        return _p.indom(domain, serial)

    @staticmethod
    def units(
        dim_space: int, dim_time: int, dim_count: int, scale_space: int, scale_time: int, scale_count: int
    ) -> int:
        return pmUnits(dim_space, dim_time, dim_count, scale_space, scale_time, scale_count).to_units().to_int()

    @staticmethod
    def uptime(now: float) -> str:
        now = int(now)
        days, rest = divmod(now, 86400)
        hours, rest = divmod(rest, 3600)
        mins, secs = divmod(rest, 60)
        return f"{days}d {hours:02d}:{mins:02d}:{secs:02d}" if days else f"{hours:02d}:{mins:02d}:{secs:02d}"

    @staticmethod
    def log(message: str) -> None:
        log.info("pmda_log", message=str(message))

    @staticmethod
    def dbg(message: str) -> None:
        """Logged whatever the level, as the binding's (not gated on a debug flag)."""
        log.info("pmda_dbg", message=str(message))

    @staticmethod
    def err(message: str) -> None:
        log.error("pmda_err", message=str(message))


_ = pmLabelSet  # re-exported for scripts that import it from here
