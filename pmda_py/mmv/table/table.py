"""The MMV harvester table: ``$PCP_TMP_DIR/mmv`` served as pmdammv serves it.

Mounted at ``mmv`` in domain 70 (``pmda-py run --mmv-compat``) it is a
drop-in for pmdammv: same names, PMIDs, descriptors, indoms, help, labels and
values (see :mod:`pmda_py.mmv` for where it is deliberately safer).

Rescans happen on pmdammv's triggers -- the directory changed (inotify; its
mtime where there is none), a loaded file's generation changed or its writer
died (the scanner thread's sweep), a file was in flux at the last scan, or
``mmv.control.reload`` was stored -- and run in a thread
(:mod:`pmda_py.mmv.scanner`), swapped in whole before a request.  Values
are read on every fetch with ``pread`` from the file's VALUES section only,
through a descriptor opened without blocking and checked on the descriptor.
"""

from __future__ import annotations

import errno
import functools
import gc
import itertools
import os
import threading
import time
from collections.abc import Sequence
from typing import Union

import structlog
import trio

from pmda_py.config import option_seconds
from pmda_py.errors import PmdaError, PmErr
from pmda_py.mmv.layout import VALUE, MmvFormatError
from pmda_py.mmv.model import (
    Export,
    ExportMetric,
    FileImage,
    MmvScalar,
    build,
    needed_runs,
    packed_values,
    read_values,
    slot_runs,
)
from pmda_py.mmv.regions import FileRegions
from pmda_py.mmv.scanner import Loaded, Scanner, changed, load_file, open_mmv
from pmda_py.mmv.table.state import PackedPlan, PackedSlots, ScanState, derive
from pmda_py.mmv.watch import DirWatch
from pmda_py.pcplabels import PcpLabelSet
from pmda_py.pcpversion import parse, pcp_conf, pcp_version
from pmda_py.pmapi import PmSem, PmType
from pmda_py.safefile import FileRefused
from pmda_py.table import (
    Columns,
    FetchRequest,
    FetchResult,
    InDom,
    LabelText,
    Metric,
    PackedColumns,
    PackedFetch,
    StoreRequest,
    Table,
    TableContext,
)

__all__ = ["MmvTable"]

log = structlog.get_logger("pmda_py.mmv")
_NO_LABELS = LabelText(b"")  #: an instance without label records
#: one metric's answer to a fetch
_Answer = Union[MmvScalar, Columns, PackedColumns, PmdaError, None]

_CONTROL_HELP = {
    "reload": (
        "Control maps reloading",
        "Writing anything other then 0 to this metric will result in\nre-reading directory and re-mapping files.\n",
    ),
    "debug": ("Debug flag", "See pmdbg(1).  pmstore into this metric to change the debug value.\n"),
    "debug7": (
        "Debug options",
        "See pmdbg(1).  pmstore into this metric to change the debug option(s)\n\n"
        "Note that if this PMDA is installed as a DSO agent, the debug options\nare shared with pmcd(1)\n",
    ),
    "files": ("Memory mapped file count", "Count of currently mapped and exported statistics files.\n"),
    "metrics": (
        "Memory mapped metric count",
        "Count of currently mapped and exported metrics.\nExcludes the mmv.control.* metrics.\n",
    ),
}


def _uids(spec: str) -> frozenset[int] | None:
    if not spec.strip():
        return None
    import pwd

    out: set[int] = set()
    for item in spec.split(","):
        item = item.strip()
        if item.isdigit():
            out.add(int(item))
        elif item:
            try:
                out.add(pwd.getpwnam(item).pw_uid)
            except KeyError:
                # refused, not skipped: a mistyped name would otherwise leave
                # every file out, the agent running and exporting nothing
                raise ValueError(f"allowed_users: no such user {item!r}") from None
    return frozenset(out)


def _installed_pcp() -> tuple[int, int, int]:
    return pcp_version()


class MmvTable(Table):
    """Memory Mapped Value files, as PCP's pmdammv exports them."""

    name = "mmv"
    accepts_options = True
    dynamic_names = True  # one subtree per MMV file, appearing and going at run time
    check_mode = "inline"  # check() is a stat and a queue read: called in the event loop
    #: files gone from the directory whose clusters are remembered
    REMEMBERED = 4096
    #: problems of one file logged per scan that finds them changed (one more line says how many were not)
    LOGGED_PROBLEMS = 16

    def __init__(
        self,
        dir: str | None = None,
        compat: str = "0",
        prefix_files: str = "1",
        allowed_users: str = "",
        pcp_version: str = "",
        rescan_wait: str = "0.005",
        inline_scan: str = "0.002",
        sweep: str = "1",
        **_options: str,
    ) -> None:
        """``allowed_users``: comma-separated user names or uids whose files
        are read; others are skipped with a log line (empty: any owner, as
        pmdammv, which checks nothing; a name that is no user: ValueError).  ``pcp_version``: the pmdammv to
        imitate (default: the installed PCP's, from pcp.conf): 7.0 added
        ``control.metrics``, made ``control.debug`` a STRING (the pmdbg option
        names) and answers indom help text; 7.2 skips a label member with an
        invalid name instead of the whole payload.  ``rescan_wait``: seconds
        the first request after a change waits for the rescan it starts (it
        is answered from the previous scan if that is not done);
        ``inline_scan``: a directory whose last scan took less is scanned
        before the request itself, as pmdammv does; ``sweep``:
        seconds between checks of the loaded files' generations and writer
        pids (pmdammv makes them on every request; here a thread does, at
        least this far apart and at most 2% of its time)."""
        self.dir = dir or os.path.join(pcp_conf()["PCP_TMP_DIR"], "mmv")
        self.allowed_uids = _uids(allowed_users)
        self.compat = compat not in ("0", "", "no", "false")
        version = parse(pcp_version) if pcp_version else _installed_pcp()
        self.pcp7 = version >= (7, 0, 0)
        self.relaxed_labels = version >= (7, 2, 0)  # libpcp commit affe8b7af9
        self.prefix_files = prefix_files not in ("0", "no", "false")
        self.reload_flag = 0
        self.debug: int | str = "" if self.pcp7 else 0
        self.export = Export([], {}, {}, 0, False, [])
        self._metrics: list[Metric] = []
        self._indoms: dict[int, InDom] = {}
        self._by_metric: dict[int, ExportMetric] = {}
        self._fetch_order: dict[int, list[int]] = {}
        self._packed: dict[int, PackedSlots] = {}
        self._plan: PackedPlan | None = None
        self._files: dict[str, Loaded] = {}
        self._dir_state: tuple[int, int] | None = None
        self._problems: dict[str, str] = {}  # file -> the problem last logged for it
        self._diag_seen: dict[tuple[str, tuple[int, int] | None], list[str]] = {}
        self._watch: DirWatch | None = None
        self._scanner: Scanner[ScanState] | None = None
        self.rescan_wait = option_seconds("rescan_wait", rescan_wait, zero=True)
        self.inline_scan = option_seconds("inline_scan", inline_scan, zero=True)
        self._scanning = threading.RLock()
        self.sweep_interval = option_seconds("sweep", sweep)
        self.last_scan: ScanState | None = None
        #: the last scan made (applied or not): its objects are reused by the next
        self._prev: ScanState | None = None
        #: scans swapped out, for the scanner thread to take apart (see _dismantle)
        self._retired: list[ScanState] = []
        self._sticky: dict[str, int] = {}  # file -> its cluster, present files last (see _remember)
        self._control()
        self.generation = 0
        self._scanned = False

    # ------------------------------------------------------------ control
    def _control(self) -> None:
        def ctl(name: str, item: int, writable: bool = False, text: str = "", t: int = PmType.I32) -> Metric:
            one, hlp = _CONTROL_HELP[text or name]
            return Metric(
                f"control.{name}",
                cluster=0,
                item=item,
                type=t,
                sem=PmSem.INSTANT,
                oneline=one,
                help=hlp,
                writable=writable,
            )

        self.c_reload = ctl("reload", 0, True)
        if self.pcp7:
            self.c_debug = ctl("debug", 1, True, "debug7", PmType.STRING)
        else:
            self.c_debug = ctl("debug", 1, True)
        self.c_files = ctl("files", 2)
        self.c_metrics = ctl("metrics", 3)

    # -------------------------------------------------------------- scan
    def metrics(self) -> Sequence[Metric]:
        if not self._scanned:
            self._apply(self._scan_state())
        # drop-in mode: 6.x's pmdammv has no control.metrics (7.0 added it)
        control = [self.c_reload, self.c_debug, self.c_files] + (
            [] if self.compat and not self.pcp7 else [self.c_metrics]
        )
        return [*control, *self._metrics]

    def indoms(self) -> Sequence[InDom]:
        return list(self._indoms.values())

    def clusters(self) -> set[int]:
        return {0, *self.export.clusters.values()}

    def _dir_stat(self) -> tuple[int, int]:
        try:
            st = os.stat(self.dir)
        except OSError as err:
            return (-1, err.errno or 0)
        return (st.st_mtime_ns, 0)

    def check(self) -> None:
        """Before every request: take a finished scan, and notice changes
        cheaply (pmdammv's triggers: the directory changed -- inotify, or
        its mtime where there is none --, a file was in flux at the last
        scan, ``mmv.control.reload`` was stored).  No file is opened here:
        a scan runs in the scanner thread, and a request waits at most
        ``rescan_wait`` seconds for it (the first one after a change);
        generations and writer pids are checked by the thread's sweep.
        A directory whose last scan took under ``inline_scan`` seconds is
        scanned here instead, as pmdammv does, unless the thread is at it.
        Declared inline (``check_mode``): called in the event loop, no deadline."""
        if not self._scanned:
            self._apply(self._scan_state())
            return
        self._take()
        if self._changed():
            last = self.last_scan
            if last is not None and last.seconds <= self.inline_scan and self._scanning.acquire(blocking=False):
                try:
                    self._apply(self._scan_state())
                finally:
                    self._scanning.release()
                return
            scanner = self._start_scanner()
            scanner.request()
            if scanner.wait(self.rescan_wait):
                self._take()

    def _changed(self) -> bool:
        if self.reload_flag or self.export.reload:
            return True
        if self._watch is not None:
            names, everything = self._watch.changes()
            return bool(names) or everything
        return self._dir_stat() != self._dir_state

    def _take(self) -> None:
        scanner = self._scanner
        if scanner is None:
            return
        if scanner.error is not None:
            err, scanner.error = scanner.error, None
            log.error("mmv_scan_failed", dir=self.dir, error=repr(err))
        state = scanner.take()
        if state is not None:
            self._apply(state)

    def _start_scanner(self) -> Scanner[ScanState]:
        if self._scanner is None:
            # looked up at each call: a test may hold the scan to show it is off the request path
            self._scanner = Scanner(lambda: self._scan_state(), lambda: self._sweep(), interval=self.sweep_interval)
        return self._scanner

    def _dismantle(self) -> None:
        """Free the scans swapped out, one object at a time: the thread
        gives the interpreter back to the event loop between any two (one
        ``del`` of a whole scan would hold it until every object is freed)."""
        while self._retired:
            st = self._retired.pop()
            if st is self._prev or st is self.last_scan:
                continue
            ex = st.export
            for seq in (ex.metrics, ex.diagnostics, st.metrics):
                while seq:
                    seq.pop()
            for mapping in (
                ex.indoms,
                ex.clusters,
                st.files,
                st.indoms,
                st.by_metric,
                st.fetch_order,
                st.packed,
                st.reuse,
            ):
                while mapping:
                    mapping.popitem()

    def _sweep(self) -> bool:
        """In the scanner thread: has a loaded file changed (pmdammv's
        per-request checks, made here instead of on every request)?"""
        self._dismantle()
        if self._watch is None and self._dir_stat() != self._dir_state:
            return True
        for name, loaded in list(self._files.items()):
            why = changed(loaded, self.allowed_uids)
            if why is not None:
                log.info("mmv_file_changed", file=name, reason=why)
                return True
        return False

    def _remember(self, clusters: dict[str, int]) -> None:
        """Remember the clusters of this scan's files (a file asking for
        none gets its own back when it comes back), and of at most
        :attr:`REMEMBERED` files gone from the directory, those seen last:
        a writer making file after file of new names cannot grow the map."""
        sticky = self._sticky
        for name, c in clusters.items():  # the present ones go last: the oldest gone ones come first
            sticky.pop(name, None)
            sticky[name] = c
        excess = len(sticky) - len(clusters) - self.REMEMBERED
        if excess > 0:
            for name in list(itertools.islice(sticky, excess)):
                del sticky[name]

    def _note(self, name: str, why: str | None, event: str, **fields: object) -> None:
        """Log a file's problem once per change of it."""
        if self._problems.get(name) == why:
            return
        if why is None:
            self._problems.pop(name, None)
            return
        self._problems[name] = why
        log.warning(event, file=name, **fields)

    def _scan_state(self) -> ScanState:
        """A scan, start to end, touching nothing the request path reads
        (runs in the scanner thread, or inline when cheap; :meth:`_apply`
        swaps it in).  One at a time."""
        with self._scanning:
            return self._scan_locked()

    def _scan_locked(self) -> ScanState:
        self._dismantle()
        t0 = time.monotonic()
        dir_state = self._dir_stat()
        images: list[FileImage] = []
        files: dict[str, Loaded] = {}
        try:
            entries = sorted(os.listdir(self.dir), key=lambda n: n.encode("utf-8", "surrogateescape"))
        except OSError as err:
            log.warning("mmv_dir_unreadable", dir=self.dir, error=err.strerror)
            entries = []
        seen = set()
        for name in entries:
            if name.startswith("."):
                continue
            seen.add(name)
            path = os.path.join(self.dir, name)
            try:
                img, loaded = load_file(name, path, self.allowed_uids)
            except FileRefused as err:
                if err.errno == errno.EPERM:  # an owner not allowed (checked on the opened file)
                    allowed = sorted(self.allowed_uids or ())
                    self._note(name, str(err), "mmv_file_owner_refused", uid=err.uid, allowed=allowed)
                continue  # not a regular file: not a candidate, as for pmdammv
            except OSError as err:
                self._note(name, str(err), "mmv_file_unreadable", error=err.strerror or str(err))
                continue
            self._note(name, None, "")
            images.append(img)
            if loaded is not None:
                files[name] = loaded
        for gone in set(self._problems) - seen:
            self._problems.pop(gone, None)
        export = build(images, sticky=self._sticky, prefix_files=self.prefix_files, relaxed_labels=self.relaxed_labels)
        diags: dict[str, list[str]] = {}
        for fname, d in export.diagnostics:
            diags.setdefault(fname, []).append(f"{d.section}@{d.offset}: {d.reason}")
        logged: dict[str, int] = {}
        for fname, d in export.diagnostics:
            key = (fname, files[fname].ident if fname in files else None)
            if self._diag_seen.get(key) != diags[fname]:
                n = logged[fname] = logged.get(fname, 0) + 1
                if n <= self.LOGGED_PROBLEMS:
                    log.warning("mmv_problem", file=fname, section=d.section, offset=d.offset, problem=d.reason)
        for fname, n in logged.items():
            if n > self.LOGGED_PROBLEMS:
                log.warning(
                    "mmv_problems_not_logged", file=fname, logged=self.LOGGED_PROBLEMS, more=n - self.LOGGED_PROBLEMS
                )
        self._diag_seen = {(f, files[f].ident if f in files else None): reasons for f, reasons in diags.items()}
        self._remember(export.clusters)
        files = {name: ld for name, ld in files.items() if name in export.clusters}
        state = self._prev = derive(export, files, dir_state, self._prev, self.pcp7)
        state.seconds = time.monotonic() - t0
        state.read_bytes = sum(i.data.read_bytes for i in images if isinstance(i.data, FileRegions))
        while images:  # freed one by one: the event loop may take the interpreter between two
            images.pop()
        return state

    def _apply(self, st: ScanState) -> None:
        """Swap a scan in (on the event loop: no request sees half of it).
        The scan it replaces is taken apart in the scanner thread (freeing
        its 100 000s of objects at once here stopped the loop for 40 ms at
        4 000 files)."""
        if self.last_scan is not None:
            self._retired.append(self.last_scan)
        self._scanned = True
        self._dir_state = st.dir_state
        self.export = st.export
        self._files = st.files
        self._indoms = st.indoms
        self._metrics = st.metrics
        self._by_metric = st.by_metric
        self._fetch_order = st.fetch_order
        self._packed = st.packed
        self.reload_flag = 1 if st.export.reload else 0
        self.generation += 1
        self.last_scan = st
        log.info("mmv_scan", dir=self.dir, files=st.export.files, metrics=len(st.metrics), seconds=round(st.seconds, 4))

    def mmv_metric(self, m: Metric) -> ExportMetric | None:
        return self._by_metric.get(id(m))

    # ------------------------------------------------------------- fetch
    async def fetch(self, request: FetchRequest) -> FetchResult:
        opened: list[int] = []
        try:
            return self._fetch(request, opened)
        finally:
            for fd in opened:
                os.close(fd)

    def _fetch(self, request: FetchRequest, opened: list[int]) -> FetchResult:
        images: dict[str, FileRegions | None] = {}
        if len(request.metrics) > 16:  # worth a plan: the whole answer in one piece
            whole = self._fetch_packed(request.metrics, images, opened)
            if whole is not None:
                return whole
        out: dict[Metric, _Answer] = {}
        by_metric, packed = self._by_metric, self._packed
        # file by file, each file's image let go once its metrics are read:
        # a fetch holds one values section at a time, not every file's
        by_file: dict[str, list[tuple[Metric, ExportMetric]]] = {}
        for m in request.metrics:
            em = by_metric.get(id(m))
            if em is None:
                out[m] = self._control_value(m)
            else:
                by_file.setdefault(em.file, []).append((m, em))
        for f, wanted in by_file.items():
            runs = slot_runs(r for _, em in wanted for r in needed_runs(em))
            img = images.pop(f) if f in images else self._read(f, opened, runs)
            for m, em in wanted:
                if img is None:
                    out[m] = PmdaError(code=PmErr.AGAIN)
                    continue
                fast = packed.get(id(m))
                words = None if fast is None else packed_values(img, em.values_offset, ((fast.first, fast.count),))
                if fast is not None and words is not None:
                    out[m] = PackedColumns(fast.insts, words.tobytes(), fast.typecode)
                else:
                    try:
                        out[m] = self._values(m, em, img)
                    except MmvFormatError as err:  # its records point at too much: this metric only
                        self._note(f, str(err), "mmv_problem", section=err.section, offset=err.offset, problem=str(err))
                        out[m] = PmdaError(code=PmErr.GENERIC)
            del img  # before the next file is read
        return out

    def _fetch_packed(
        self, metrics: Sequence[Metric], images: dict[str, FileRegions | None], opened: list[int]
    ) -> PackedFetch | None:
        """The whole answer in one piece when every metric asked for is one
        of a single file's packed-path metrics (the plan is made once per
        scan and request shape); None sends the request down the metric by
        metric path (``images`` keeps the file read here)."""
        plan = self._plan
        if plan is None or plan.metrics != metrics or plan.generation != self.generation:
            plan = self._plan = PackedPlan.make(metrics, self._by_metric, self._packed, self.generation)
        if plan.file is None:
            return None
        img = images[plan.file] = self._read(plan.file, opened, plan.runs)
        blob = None if img is None else packed_values(img, plan.values_offset, plan.runs)
        if blob is None:
            return None
        return PackedFetch(metrics, plan.vtypes, plan.insts, blob, plan.indoms, plan)

    def _control_value(self, m: Metric) -> int | str | PmdaError:
        if m is self.c_reload:
            return self.reload_flag
        if m is self.c_debug:
            return self.debug
        if m is self.c_files:
            return self.export.files
        if m is self.c_metrics:
            return len(self._metrics)
        return PmdaError(code=PmErr.PMID)

    def _read(self, name: str, opened: list[int], runs: Sequence[tuple[int, int]]) -> FileRegions | None:
        """The file's value records ``runs`` (``(first, count)`` each: what
        the fetch needs, not the whole section; what its string values point
        at, on demand) as they are now, through a descriptor opened without
        blocking and checked (regular file, owner) on the descriptor; the
        descriptor goes into ``opened`` for the caller to close."""
        entry = self._files.get(name)
        if entry is None:
            return None
        try:
            fd, st = open_mmv(entry.path, self.allowed_uids)
        except OSError as err:
            self._note(name, str(err), "mmv_file_unreadable", error=str(err))
            self._start_scanner().request()
            return None
        opened.append(fd)
        img = FileRegions(functools.partial(os.pread, fd), st.st_size)
        img.add(0, len(entry.head))
        base, size = entry.values
        if base >= 0:
            for first, n in runs:
                img.add(base + first * VALUE.size, min(n * VALUE.size, size - first * VALUE.size))
        if img.read(0, len(entry.head)) != entry.head:
            # another layout, or another generation, under the name (a file
            # replaced by an identical one is read: the scanned offsets apply)
            log.info("mmv_file_changed", file=name)
            self._start_scanner().request()
            return None
        return img

    def _values(self, m: Metric, em: ExportMetric, img: FileRegions) -> _Answer:
        if em.type == PmType.NOSUPPORT:
            return PmdaError(code=PmErr.APPVERSION)
        order = self._fetch_order.get(id(m)) if m.indom is not None else None
        insts, vals = read_values(em, img, order)
        if m.indom is None:
            if not em.slots:
                return PmdaError(code=PmErr.INST)
            return vals[0] if vals else None
        return Columns(insts, vals)

    def label_items(self, level: int, subject: object) -> LabelText | None:
        """Label sets exactly as pmdammv's libpcp builds them (see
        :mod:`pmda_py.pcplabels`): no set where pmdammv sends none,
        and an empty one per instance without labels."""
        lset: PcpLabelSet | None = None
        if level == 0x08:  # cluster
            for em in self.export.metrics:
                if em.cluster == subject:
                    lset = em.cluster_labels
                    break
        elif level == 0x10:  # item
            found = self._by_metric.get(id(subject))
            lset = found.item_labels if found is not None else None
        elif level == 0x04 and isinstance(subject, InDom):  # indom
            ei = self.export.indoms.get(subject.serial)
            lset = ei.labels if ei is not None else None
        elif level == 0x20 and isinstance(subject, tuple):  # instances: (InDom, instance)
            ind, inst = subject
            ei = self.export.indoms.get(ind.serial) if isinstance(ind, InDom) else None
            lset = ei.instance_labels.get(inst) if ei is not None else None
            if lset is None:
                return _NO_LABELS
        else:
            return None
        if lset is None:
            return None
        return LabelText(lset.json, lset.labels)

    async def refresh_instances(self, indom: InDom) -> None:
        """Nothing: :meth:`check` ran before the request."""

    async def store(self, request: StoreRequest) -> None:
        if len(request.values) != 1:
            raise PmdaError(code=PmErr.BADSTORE)
        value = next(iter(request.values.values()))
        if request.metric is self.c_reload:
            self.reload_flag = int(value)
        elif request.metric is self.c_debug:
            self.debug = str(value) if self.pcp7 else int(value)
        else:
            raise PmdaError(code=PmErr.PERMISSION)

    async def startup(self, context: TableContext) -> None:
        """The first scan (unless one ran already), the directory watch
        and the scanner thread."""
        if self._watch is None:
            self._watch = DirWatch.open(self.dir)
            if self._watch is None:
                log.info("mmv_dir_polled", dir=self.dir, reason="no inotify: its mtime is checked per request")
        if not self._scanned:
            self._apply(await trio.to_thread.run_sync(self._scan_state))
        # the first scan's objects (and the index built on them) out of later
        # collections now, once, rather than at the first rescan's (see Scanner)
        gc.collect()
        gc.freeze()
        self._start_scanner()

    async def shutdown(self) -> None:
        if self._scanner is not None:
            self._scanner.stop()
        if self._watch is not None:
            self._watch.close()
            self._watch = None
