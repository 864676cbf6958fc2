"""A compat script's metrics as one pmda_py :class:`~pmda_py.table.Table`.

The script's tables (``add_metric``, ``add_indom``, ``replace_indom``) are
read into :class:`Metric` and :class:`InDom` objects whenever they change;
requests run the script's callbacks in the binding's order:

* FETCH: ``fetch()`` (prefetch), then ``refresh_all(clusters)`` and
  ``refresh(cluster)`` once per distinct cluster of the requested PMIDs (in
  the order they first appear; unknown PMIDs' clusters included, also when
  no PMID is known), then ``fetch_callback(cluster, item, inst)`` for each metric and each
  instance of its indom the client's profile takes, read as
  :mod:`pmda_py.compat.callbacks` says;
* INSTANCE: ``instance(serial)`` first (an indom the script did not add
  too: :mod:`pmda_py.compat.meta`);
* STORE: ``store_callback(cluster, item, inst, value)`` value by value, the
  first refusal answering the store;
* every request: ``refresh_metrics()`` first (in :meth:`check`), when set;
* LABEL: ``label(ident, type)``/``notes`` and ``label_callback(indom,
  inst)``/``notes_callback`` JSON text, laid out by pmda_py's transcription
  of libpcp's label parser (asked as :mod:`pmda_py.compat.meta` says).

Callback batches (a LABEL's too) run in a worker thread
(:mod:`pmda_py.compat.worker`) under the table's deadline, one batch at a
time: one that overruns it answers PM_ERR_AGAIN (the batch goes on in its
thread; requests meanwhile answer from the tables as they are, FETCH and
LABEL with PM_ERR_AGAIN), so pmcd is never kept waiting.  The endcontext
callback runs in the event loop's thread when no batch runs (else the next
batch calls it first), not under the deadline.
"""

from __future__ import annotations

import contextlib
import errno
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

import attrs
import structlog

from pmda_py.compat.agent import AGENT
from pmda_py.compat.callbacks import int32
from pmda_py.compat.foreign import script_indom
from pmda_py.compat.oddtype import script_metric
from pmda_py.compat.readings import EAGAIN, NO_INSTS, SINGLE, SOURCE, Insts, callback_error, log_raised, read_values
from pmda_py.compat.worker import CallbackThread
from pmda_py.dispatch.coerce import includes_all
from pmda_py.dispatch.problems import ProblemLog
from pmda_py.errors import PmdaError, PmErr
from pmda_py.pcplabels import level_labels_status
from pmda_py.pmapi import PM_INDOM_NULL, LabelType, PmType, pmid_cluster, pmid_item
from pmda_py.table import (
    Columns,
    FetchRequest,
    FetchResult,
    InDom,
    LabelSubject,
    LabelText,
    Metric,
    Scalar,
    StoreRequest,
    Table,
    Values,
)
from pmda_py.wire import ProfilePdu

__all__ = ["CompatTable", "CheckedCompatTable"]

if TYPE_CHECKING:
    from pmda_py.compat.pmda import MetricDispatch, pmdaIndom
    from pmda_py.dispatch import Dispatcher

log = structlog.get_logger("pmda_py.compat")
_T = TypeVar("_T")

#: the PMID domain that marks a dynamic PMNS root (pmcd's DYNAMIC_PMID)
_DYNAMIC_PMID = 511
PM_LABEL_OPTIONAL = 0x80


def _empty_labelset(s: str) -> bool:
    return len(s) < 2 or s.startswith("{}")


class CompatTable(Table):
    """The metrics of the script's PMDA object (mounted at the root)."""

    name = ""
    deadline = 4.0  # under pmcd's 5 s agent timeout
    sees_every_fetch = True  # the hooks run for a FETCH of unknown PMIDs only, too

    def __init__(self, pmda: MetricDispatch, *, help_file: bool = False) -> None:
        self.pmda = pmda
        self.help_file = help_file  # texts come from the help file, not add_metric's
        self.dispatcher: Dispatcher | None = None  # set by the runtime: for the names-changed flag
        self._built = -1
        self._metrics: list[Metric] = []
        self._info: dict[Metric, tuple[int, int, int, int | None]] = {}
        self._indoms: dict[int, InDom] = {}
        self._orphans: dict[int, InDom] = {}  # indoms metrics name but the script never added
        #: per list indom, the token (pmdaIndom.list_token) of the instances
        #: last read, and their ids: read again only when it changes
        self._tokens: dict[int, object | None] = {}
        self._ids: dict[int, _KeptInsts] = {}
        self._ended: list[int] = []  # client contexts whose endcontext callback waits for the lock
        #: what the script's callbacks do wrong, each logged once an hour (a callback failing for
        #: every instance at every FETCH would write a traceback each time)
        self.problems = ProblemLog()
        self.rebuild()

    # ----------------------------------------------------------- the tables

    def rebuild(self) -> bool:
        """Read the script's tables again if they changed; True if so."""
        if AGENT.version == self._built:
            return False
        self._built = AGENT.version
        pmda = self.pmda
        indoms: dict[int, InDom] = {}
        for it, pi in list(pmda._indoms.items()):
            # by its whole number, as libpcp_pmda looks it up: another domain's indom of a serial is not the PMDA's
            ind = self._indoms.get(it) or script_indom(it, AGENT.domain)
            if not self.help_file:
                ind.oneline = pmda._indom_oneline.get(it)
                ind.help = pmda._indom_helptext.get(it)
            _set_instances(ind, pi.listing())
            indoms[it] = ind
        self._indoms = indoms
        self._tokens.clear()
        self._ids.clear()
        # indoms named by metrics but never added (no instances): kept while
        # still unadded, dropped once the script adds them
        orphans, self._orphans = self._orphans, {}
        metrics: list[Metric] = []
        info: dict[Metric, tuple[int, int, int, int | None]] = {}
        writable = AGENT.callbacks["store_callback"] is not None
        for pmid, pm in list(pmda._metrics.items()):
            if (pmid >> 22) & 0x1FF == _DYNAMIC_PMID:
                continue  # a dynamic-root marker (pmdaopenmetrics' NAME -> 511.DOMAIN.0): a name, not a metric
            d = pm.m_desc
            it = d.indom & 0xFFFFFFFF
            mind: InDom | None = None
            if it != PM_INDOM_NULL:
                mind = indoms.get(it)
                if mind is None:
                    mind = self._orphans.setdefault(it, orphans.get(it) or script_indom(it, AGENT.domain))
            try:
                m = script_metric(
                    d.type,
                    pmda._metric_names[pmid],
                    cluster=pmid_cluster(pmid),
                    item=pmid_item(pmid),
                    sem=d.sem,
                    units=d.units.to_units(),
                    indom=mind,
                    oneline=None if self.help_file else pmda._metric_oneline.get(pmid),
                    help=None if self.help_file else pmda._metric_helptext.get(pmid),
                    writable=writable,
                    keep_sem=True,
                )
            except ValueError as err:
                log.error("metric_refused", pmid=pmid, error=str(err))
                continue
            metrics.append(m)
            info[m] = (pmid_cluster(pmid), pmid_item(pmid), m.type, None if mind is None else it)
        self._metrics, self._info = metrics, info
        self.generation += 1
        return True

    def sync_instances(self) -> None:
        """The indoms' instances as the script's tables hold them now."""
        if self.rebuild():
            return
        tokens = self._tokens
        for it, ind in self._indoms.items():
            pi = self.pmda._indoms.get(it)
            if pi is None:
                continue
            token = pi.list_token()
            if token is not None and tokens.get(it) is token:
                continue  # a list indom whose instances were not replaced
            _set_instances(ind, pi.listing())
            tokens[it] = token

    def metrics(self) -> Sequence[Metric]:
        return self._metrics

    def indoms(self) -> Sequence[InDom]:
        return [*self._indoms.values(), *self._orphans.values()]

    @property
    def domain_labels(self) -> Mapping[str, object]:
        """The ``label(domain, PM_LABEL_DOMAIN)`` set (non-empty: no ``agent``
        label).  An error of the label or notes callback is the request's
        (PmdaError), as in the binding; the notes are not sent."""
        return self.domain_labels_of(AGENT.domain)

    @domain_labels.setter
    def domain_labels(self, value: Mapping[str, object]) -> None:
        pass

    def domain_labels_of(self, ident: int) -> Mapping[str, object]:
        """:attr:`domain_labels`, the callbacks asked about ``ident`` (a
        request's: pmcd sends the domain, dbpmda PM_ID_NULL); the caller
        holds the callback lock (:meth:`in_worker`)."""
        payloads = self._payloads(ident, LabelType.DOMAIN, "label", "notes")
        _, statuses = level_labels_status(payloads, LabelType.DOMAIN)
        if statuses and statuses[-1] < 0:
            raise PmdaError(code=statuses[-1])
        text = payloads[0][0] if payloads and payloads[0][1] == 0 else b""
        if not text:
            return {}
        try:
            labels = json.loads(text)
        except ValueError:
            return {}
        return labels if isinstance(labels, dict) else {}

    # ------------------------------------------------------------ callbacks

    def _locked(self, fn: Callable[..., _T], *args: object) -> _T:
        try:
            self._ended_contexts()
            return fn(*args)
        finally:
            AGENT.lock.release()

    def _ended_contexts(self) -> None:
        """The endcontext callbacks deferred while a batch ran (lock held)."""
        while self._ended:
            self._call("endcontext_callback", self._ended.pop(0))

    async def in_worker(self, fn: Callable[..., _T], *args: object) -> _T:
        """Run ``fn`` in the worker thread holding the callback lock (under
        the deadline of the runner that awaits it); a batch still running
        answers PM_ERR_AGAIN at once."""
        if not AGENT.lock.acquire(blocking=False):
            raise PmdaError("the PMDA's callbacks are still busy with an earlier request", code=PmErr.AGAIN)
        return await _THREAD.run(self._locked, fn, *args)

    def _call(self, what: str, *args: object) -> bool:
        """Call a hook; False (logged) if it raised."""
        fn = AGENT.callbacks[what]
        if fn is None:
            return True
        try:
            fn(*args)
        except Exception as exc:
            self.problems.error(SOURCE, "callback_failed", callback=what, error=callback_error(exc), exc_info=True)
            return False
        return True

    async def fetch(self, request: FetchRequest) -> FetchResult:
        AGENT.context = request.context
        out = await self.in_worker(self._fetch, request)
        self.sync_instances()
        if AGENT.notify_change and self.dispatcher is not None:
            self.dispatcher.names_changed = self.dispatcher.labels_changed = True  # as the binding: both
            AGENT.notify_change = False
        return out

    def _fetch(self, request: FetchRequest) -> dict[Metric, Values]:
        cb = AGENT.callbacks
        ok = self._call("fetch")
        if ok and (cb["refresh_all"] is not None or cb["refresh"] is not None):
            clusters = _clusters(request, self._info)
            ok = self._call("refresh_all", clusters) if cb["refresh_all"] is not None else True
            if cb["refresh"] is not None:
                for c in clusters:
                    ok = self._call("refresh", c) and ok
        if not ok:
            failed = PmdaError(code=EAGAIN)
            return dict.fromkeys(request.metrics, failed)
        fcb = cb["fetch_callback"]
        indoms = self.pmda._indoms
        profile = request.profile
        out: dict[Metric, Values] = {}
        inst_lists: dict[int, Insts] = {}  # per indom, once per fetch
        for m in request.metrics:
            found = self._info.get(m)
            if found is None:
                continue
            cluster, item, mtype, it = found
            if it is None:
                insts = SINGLE
            else:
                insts_of = inst_lists.get(it)
                if insts_of is None:
                    pi = indoms.get(it)
                    if isinstance(profile, ProfilePdu) and includes_all(profile, it):
                        insts_of = self._all_ids(it, pi)
                    else:
                        listing = pi.listing() if pi is not None else []
                        insts_of = Insts.of([i for i, _ in listing if profile.includes(it, i)])
                    inst_lists[it] = insts_of
                insts = insts_of
                if not insts.ids:
                    if mtype == PmType.NOSUPPORT:
                        out[m] = _NO_VALUES
                    continue
            if fcb is None:
                out[m] = PmdaError(code=PmErr.VALUE)
                continue
            got, values, sts = read_values(fcb, cluster, item, mtype, insts, self.problems)
            if not values:
                if sts < 0:
                    out[m] = PmdaError(code=sts)
                elif mtype == PmType.NOSUPPORT:
                    out[m] = _NO_VALUES  # (the engine's own answer for this type is PM_ERR_APPVERSION)
            elif it is None:
                out[m] = values[0]
            else:
                out[m] = Columns(got, values)
        return out

    def _all_ids(self, it: int, pi: pmdaIndom | None) -> Insts:
        """Every instance id of the script's indom ``it``, in its order
        (kept while a list indom's instances are not replaced; shared, so
        never changed in place)."""
        if pi is None:
            return NO_INSTS
        token = pi.list_token()
        kept = self._ids.get(it)
        if token is not None and kept is not None and kept.token is token:
            return kept.insts
        insts = Insts.of([i for i, _ in pi.listing()])
        if token is not None:
            self._ids[it] = _KeptInsts(token, insts)
        return insts

    def added(self, indom: int) -> bool:
        """Whether ``indom`` is one the script added (not only one a metric
        names): libpcp_pmda knows only those."""
        return indom in self._indoms

    async def refresh_instances(self, indom: InDom) -> None:
        await self.call_instance(indom.serial)

    async def call_instance(self, serial: int) -> None:
        """The instance callback for ``serial`` (an indom the script may
        not have), then the instances as the script's tables hold them.
        A callback that raised (logged) is the request's EAGAIN, as the
        binding answers it."""
        if (
            AGENT.callbacks["instance"] is not None
            and AGENT.lock.acquire(blocking=False)
            and not await _THREAD.run(self._locked, self._call, "instance", serial)
        ):
            raise PmdaError(code=EAGAIN)
        self.sync_instances()

    async def store(self, request: StoreRequest) -> None:
        AGENT.context = request.context
        found = self._info[request.metric]
        await self.in_worker(self._store, found[0], found[1], request.values)
        self.sync_instances()

    def _store(self, cluster: int, item: int, values: Mapping[int, Scalar]) -> None:
        scb = AGENT.callbacks["store_callback"]
        if scb is None:
            raise PmdaError(code=PmErr.PERMISSION)
        for inst, value in values.items():
            try:
                result = scb(cluster, item, inst & 0xFFFFFFFF, value)
            except Exception as exc:
                log_raised(self.problems, "store_callback", cluster, item, inst, exc)
                raise PmdaError(code=EAGAIN) from None
            try:
                code = int32(result)
            except Exception:
                self.problems.error(SOURCE, "store_callback_bad_status", result=repr(result)[:80])
                code = -errno.EINVAL
            if code < 0:
                raise PmdaError(code=code)

    def end_context(self, context: int) -> None:
        """The endcontext callback, never beside a running batch: while one
        runs, it is called first by the next batch (in the worker thread)."""
        if AGENT.callbacks["endcontext_callback"] is None:
            return
        self._ended.append(context)
        if AGENT.lock.acquire(blocking=False):
            try:
                self._ended_contexts()
            finally:
                AGENT.lock.release()
        else:
            log.info("endcontext_deferred", context=context, reason="a batch of callbacks is running")

    # --------------------------------------------------------------- labels

    def _label_text(self, ident: int, type_: int, which: str) -> bytes | None:
        """One label callback's JSON text (None: no callback, or an empty
        set); a callback that raised is PmdaError(-EAGAIN), one that gave
        what the binding's ``"s"`` format refuses (not a str, a NUL, a lone
        surrogate) PmdaError(-EINVAL), as the binding answers them."""
        fn = AGENT.callbacks[which]
        if fn is None:
            return None
        try:
            text = fn(ident, type_)
        except Exception as exc:
            self.problems.error(SOURCE, "callback_failed", callback=which, error=callback_error(exc), exc_info=True)
            raise PmdaError(code=EAGAIN) from None
        try:
            if not isinstance(text, str) or "\0" in text:
                raise ValueError(type(text).__name__)
            data = text.encode("utf-8")
        except ValueError:  # (UnicodeEncodeError included)
            self.problems.error(SOURCE, "bad_labels_result", callback=which, expected="str", got=repr(text)[:80])
            raise PmdaError(code=-errno.EINVAL) from None
        return None if _empty_labelset(text) else data

    def _payloads(self, ident: int, type_: int, label: str, notes: str) -> list[tuple[bytes, int]]:
        """The label and then the notes callback's texts, with their flags."""
        out = []
        text = self._label_text(ident, type_, label)
        if text is not None:
            out.append((text, 0))
        text = self._label_text(ident, type_, notes)
        if text is not None:
            out.append((text, PM_LABEL_OPTIONAL))
        return out

    def label_items(self, level: int, subject: LabelSubject) -> list[tuple[str, str, int]] | LabelText | None:
        """The labels of a level from the script's label and notes
        callbacks, not while its callbacks run elsewhere (PM_ERR_AGAIN).  As
        in the binding, an error of either callback, or libpcp refusing the
        text the last callback gave, answers the request with that error; an
        instance whose callbacks fail or give a refused text has no labels."""
        cb = AGENT.callbacks
        if level == LabelType.INSTANCES:
            if not isinstance(subject, tuple):
                return None
            with _callbacks_free():
                return self.instance_labels(*subject)
        if cb["label"] is None and cb["notes"] is None:
            return None
        if level == LabelType.INDOM and isinstance(subject, InDom):
            ident = subject.id
        elif level == LabelType.CLUSTER and isinstance(subject, int):
            ident = subject
        elif level == LabelType.ITEM and isinstance(subject, Metric):
            ident = subject.pmid(AGENT.domain)
        else:
            return None
        with _callbacks_free():
            found = self.level_labels(ident, level)
        return [] if found is None else found

    def instance_labels(self, ind: InDom, inst: int) -> LabelText:
        """What the script's ``label_callback`` and ``notes_callback`` give
        for an instance (the caller holds the callback lock): an instance
        whose callbacks fail or give a text libpcp refuses has no labels."""
        if AGENT.callbacks["label_callback"] is None and AGENT.callbacks["notes_callback"] is None:
            return LabelText(b"")
        try:
            # the binding passes the instance as an unsigned int (-5 is 4294967291)
            payloads = self._payloads(ind.id, inst & 0xFFFFFFFF, "label_callback", "notes_callback")
        except PmdaError:
            return LabelText(b"")
        pls, statuses = level_labels_status(payloads, LabelType.INSTANCES)  # both texts' labels, merged
        if pls is None or any(sts < 0 for sts in statuses):
            return LabelText(b"")
        return LabelText(pls.json, pls.labels)

    def level_labels(self, ident: int, level: int) -> LabelText | None:
        """What the script's label and notes callbacks give for ``ident``
        at ``level`` (the binding asks them about any ident, one the PMDA
        has or not, the instances level included; the caller holds the
        callback lock); None: no labels.  An error of either callback, or
        libpcp refusing the text the last one gave, is raised (PmdaError),
        as the binding answers it."""
        if AGENT.callbacks["label"] is None and AGENT.callbacks["notes"] is None:
            return None
        payloads = self._payloads(ident, level, "label", "notes")
        found, statuses = level_labels_status(payloads, level)
        if statuses and statuses[-1] < 0:
            raise PmdaError(code=statuses[-1])
        return None if found is None else LabelText(found.json, found.labels)


@contextlib.contextmanager
def _callbacks_free() -> Iterator[None]:
    """Hold the callback lock for a call made in the event loop's thread (a
    label callback): PM_ERR_AGAIN at once while a batch is still running in
    the worker thread, so the script's callbacks never run two at a time."""
    if not AGENT.lock.acquire(blocking=False):
        raise PmdaError("the PMDA's callbacks are still busy with an earlier request", code=PmErr.AGAIN)
    try:
        yield
    finally:
        AGENT.lock.release()


def _set_instances(ind: InDom, listing: list[tuple[int, str]]) -> None:
    """``ind``'s instances as the script's indom lists them: an id listed
    twice keeps its first name (libpcp_pmda looks an id up so) and is
    listed twice, as libpcp_pmda lists it."""
    names: dict[int, str] = {}
    for inst, name in listing:
        names.setdefault(inst, name)
    repeated = tuple(listing) if len(names) != len(listing) else None
    if repeated != ind.listing:
        ind.listing = repeated
        ind.set(names)
    elif names != ind.instances:
        ind.set(names)


def _clusters(request: FetchRequest, info: Mapping[Metric, tuple[int, int, int, int | None]]) -> list[int]:
    """The binding's refresh clusters: every requested PMID's (whatever its
    domain, known or not), each once, in the order they first appear."""
    if request.pmids:
        return list(dict.fromkeys(map(pmid_cluster, request.pmids)))
    return list(dict.fromkeys(info[m][0] for m in request.metrics if m in info))


@attrs.frozen
class _KeptInsts:
    """A list indom's instances, kept while its token stays the same."""

    token: object
    insts: Insts


#: a metric's answer of no values (numval 0), where the engine would answer otherwise
_NO_VALUES = PmdaError("no values", code=0)
#: where the script's callbacks run
_THREAD = CallbackThread()


class CheckedCompatTable(CompatTable):
    """A CompatTable whose script set ``refresh_metrics``: called before
    every request, in a worker thread under :attr:`check_deadline`."""

    check_deadline = 2.0

    def check(self) -> None:
        if not AGENT.lock.acquire(blocking=False):
            return
        try:
            self._call("refresh_metrics")
        finally:
            AGENT.lock.release()
        self.rebuild()
