"""Odd and hostile tables and returns, compared with the real binding under
real dbpmda: what a script may hand the binding that no Debian PMDA does
(negative or repeated instance ids, names shared by several ids,
PM_TYPE_NOSUPPORT metrics), and what the callbacks are given then."""

from __future__ import annotations

from pathlib import Path

from tests.compat.harness import ScriptPmda, under_both, under_compat

INSTANCES = ScriptPmda(
    "odd",
    412,
    prelude="CALLS = []",
    init="""
        null, instant = c_api.PM_INDOM_NULL, c_api.PM_SEM_INSTANT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(-5, "neg"), pmdaInstid(3, "three"),
                                                 pmdaInstid(-2147483648, "min")]))
        self.add_indom(pmdaIndom(self.indom(1), [pmdaInstid(1, "a"), pmdaInstid(1, "b"), pmdaInstid(2, ""),
                                                 pmdaInstid(7, "x y"), pmdaInstid(9, "a")]))
        self.add_metric("odd.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, null, instant, u))
        self.add_metric("odd.neg", pmdaMetric(self.pmid(0, 1), c_api.PM_TYPE_U32, self.indom(0), instant, u))
        self.add_metric("odd.dup", pmdaMetric(self.pmid(0, 2), c_api.PM_TYPE_32, self.indom(1), instant, u))
        self.set_fetch_callback(self.fetch_cb)
        self.set_label_callback(self.label_cb)
    """,
    methods="""
    def label_cb(self, indom, inst):
        CALLS.append("L%d" % inst)
        return '{"i":%d}' % inst

    def fetch_cb(self, cluster, item, inst):
        if item == 0:
            text = ",".join(CALLS)
            del CALLS[:]
            return [text, 1]
        CALLS.append("%d[%d]" % (item, inst))
        return [inst if item == 1 else inst % 100, 1]
    """,
)

INSTANCE_COMMANDS = """fetch odd.neg
fetch odd.calls
label instances 412.0
fetch odd.calls
instance 412.0
instance 412.0 "neg"
instance 412.1
instance 412.1 1
instance 412.1 "a"
instance 412.1 "b"
instance 412.1 "x"
fetch odd.dup
fetch odd.calls
label instances 412.1
fetch odd.calls
"""


def test_instance_ids_as_the_binding_gives_and_lists_them(root: Path) -> None:
    """A negative instance id reaches the fetch and label callbacks as the
    unsigned int the binding passes (-5 is 4294967291); an id listed twice
    is listed twice and looked up by its first name, and a name given to
    two ids finds the first, as libpcp_pmda does."""
    real, ours = under_both(INSTANCES, INSTANCE_COMMANDS, root)
    assert 'value "1[4294967291],1[3],1[2147483648]"' in real, real
    assert 'value "L4294967291,L3,L2147483648"' in real, real
    assert '[  0] inst: 1 name: "a"\n[  1] inst: 1 name: "b"' in real, real
    assert ours == real


NOSUPPORT = ScriptPmda(
    "ns",
    413,
    prelude="CALLS = []",
    init="""
        null, instant, nosupport = c_api.PM_INDOM_NULL, c_api.PM_SEM_INSTANT, c_api.PM_TYPE_NOSUPPORT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "zero"), pmdaInstid(1, "one")]))
        self.add_indom(pmdaIndom(self.indom(1), []))
        self.add_metric("ns.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, null, instant, u))
        self.add_metric("ns.value", pmdaMetric(self.pmid(0, 1), nosupport, null, instant, u))
        self.add_metric("ns.none", pmdaMetric(self.pmid(0, 2), nosupport, null, c_api.PM_SEM_COUNTER, u))
        self.add_metric("ns.error", pmdaMetric(self.pmid(0, 3), nosupport, null, instant, u))
        self.add_metric("ns.insts", pmdaMetric(self.pmid(0, 4), nosupport, self.indom(0), instant, u))
        self.add_metric("ns.empty", pmdaMetric(self.pmid(0, 5), nosupport, self.indom(1), instant, u))
        self.set_fetch_callback(self.fetch_cb)
    """,
    methods="""
    def fetch_cb(self, cluster, item, inst):
        if item == 0:
            text = ",".join(CALLS)
            del CALLS[:]
            return [text, 1]
        CALLS.append("%d[%d]" % (item, inst % 100))
        if item == 2:
            return None
        if item == 3:
            return [c_api.PM_ERR_INST, 0]
        return [1, 1]
    """,
)

NOSUPPORT_COMMANDS = """desc ns.value
fetch ns.value
fetch ns.none
fetch ns.error
fetch ns.insts
fetch ns.empty
fetch ns.calls
"""


def test_a_nosupport_metric_is_answered_as_the_binding_answers_it(root: Path) -> None:
    """A PM_TYPE_NOSUPPORT metric's callback is called, and its answer is
    the binding's: -ENOTSUP for a value, no values for None, the error it
    returned ignored, as the binding ignores it (not PM_ERR_APPVERSION,
    the engine's own answer for the type)."""
    real, ours = under_both(NOSUPPORT, NOSUPPORT_COMMANDS, root)
    assert "413.0.1 (<noname>): Operation not supported" in real, real
    assert "413.0.2 (<noname>): No values returned!" in real, real
    assert 'value "1[95],2[95],3[95],4[0],4[1]"' in real, real
    assert ours == real


LABELS = ScriptPmda(
    "lab",
    415,
    prelude=r"""
    # per cluster: (label, notes) returns; "raise" raises
    LEVEL = {
        0: ('{"ok":1}', "{}"),
        1: (None, "{}"),
        2: (b'{"b":1}', "{}"),
        3: (5, "{}"),
        4: ("raise", "{}"),
        5: ('{"a":"x\x00y"}', "{}"),
        6: ('{"A-b":1}', "{}"),
        7: ('{"a":1,"a":2}', "{}"),
        8: ('{"a":1}junk', "{}"),
        9: ('"text"', "{}"),
        10: ('{"broken": ', "{}"),
        11: ('{"a":1}', None),
        12: ('{"a":1}', "raise"),
        13: ('{"a":1}', '{"N-o":1}'),
        14: ('{"A-b":1}', '{"n":1}'),
        15: ('{"\udcff":1}', "{}"),
        16: ('{"a":1}', '{"broken": '),
    }
    # per instance: (label_callback, notes_callback) returns
    INSTANCE = {
        1: (None, '{"o":1}'),
        2: ('{"i":2}', '{"o":1}'),
        3: ("raise", '{"o":1}'),
        4: ('{"A-b":1}', '{"o":1}'),
        5: ('{"broken": ', '{"o":1}'),
        6: ('{"i":6}', None),
        7: ('{"i":7}', "raise"),
        8: ('{"i":8}', '{"N-o":1}'),
        9: ('{"i":9}', '{"broken": '),
    }


    def pick(value):
        if value == "raise":
            raise ValueError("a label callback failed")
        return value
    """,
    init="""
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(k, "i%d" % k) for k in INSTANCE]))
        for k in LEVEL:
            self.add_metric("lab.m%d" % k, pmdaMetric(self.pmid(k, 0), c_api.PM_TYPE_32, self.indom(0),
                            c_api.PM_SEM_INSTANT, u))
        self.set_fetch_callback(lambda cluster, item, inst: [1, 1])
        self.set_label(lambda ident, kind: self.level(ident, kind, 0))
        self.set_notes(lambda ident, kind: self.level(ident, kind, 1))
        self.set_label_callback(lambda indom, inst: pick(INSTANCE[inst][0]))
        self.set_notes_callback(lambda indom, inst: pick(INSTANCE[inst][1]))
    """,
    methods="""
    def level(self, ident, kind, which):
        if kind != c_api.PM_LABEL_CLUSTER:
            return "{}"
        return pick(LEVEL[ident][which])
    """,
)

#: after each case a request that calls the callbacks again: the binding
#: leaves a Python exception set after a bad return, failing that next call
#: (the difference docs/compat.md lists); its reply is not compared
_ABSORB = "label cluster 415.0\n"


def _label_blocks(transcript: str) -> list[str]:
    """Each label request and its reply, but for the absorbing ones."""
    blocks = ["label " + b for b in transcript.split("\nlabel ")[1:]]
    return [b for b in blocks if not b.startswith(_ABSORB)]


def test_label_callback_errors_as_the_binding_answers_them(root: Path) -> None:
    """A label or notes callback that raises (-EAGAIN) or gives what is
    not a string (-EINVAL) fails the LABEL request; so does a text libpcp
    refuses when it is the last one given (the label's is overridden by the
    notes'); an instance whose callbacks fail or give a refused text has no
    labels.  pmda-py compat sent the labels of whatever parsed instead."""
    commands = _ABSORB + "".join(f"label cluster 415.{k}\n{_ABSORB}" for k in range(1, 17))
    commands += f"label instances 415.0\n{_ABSORB}"
    real, ours = map(_label_blocks, under_both(LABELS, commands, root))
    assert len(real) == 17, real
    assert "Error PDU: Invalid argument" in real[0] and "Resource temporarily unavailable" in real[3], real
    assert "Labels:\n    n=1" in real[13], real
    assert ours == real


BUSY = ScriptPmda(
    "busy",
    416,
    prelude="""
    import os
    import time

    RELEASE = os.path.join(os.getcwd(), "release")
    INSIDE = []
    """,
    init="""
        self.add_metric("busy.wait", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_U32, c_api.PM_INDOM_NULL,
                        c_api.PM_SEM_INSTANT, u))
        self.set_fetch_callback(self.fetch_cb)
        self.set_label(self.label)
    """,
    methods="""
    def fetch_cb(self, cluster, item, inst):
        # waits (3 s at most) for the label callback to release it
        INSIDE.append(1)
        end = time.time() + 3
        while not os.path.exists(RELEASE) and time.time() < end:
            time.sleep(0.01)
        INSIDE.pop()
        return [1, 1]

    def label(self, ident, kind):
        if kind != c_api.PM_LABEL_CLUSTER:
            return "{}"
        overlap = bool(INSIDE)
        open(RELEASE, "w").close()
        return '{"overlap":%s}' % ("true" if overlap else "false")
    """,
)


def test_a_label_callback_never_runs_beside_a_running_batch(root: Path) -> None:
    """A fetch callback still running in the worker thread (its FETCH
    answered PM_ERR_AGAIN at the deadline) and then a LABEL request: the
    label callback must not run at the same time (the binding runs one
    callback at a time; scripts share their state between callbacks).
    pmda-py compat called label callbacks from the event loop's thread,
    beside the batch; the request now answers PM_ERR_AGAIN while a batch
    runs, as a FETCH does."""
    out = under_compat(BUSY, "fetch busy.wait\nlabel cluster 416.0\n", root, env={"PYPMDA_COMPAT_DEADLINE": "0.5"})
    assert "Try again" in out.split("label cluster")[0], out  # the batch outlived its deadline
    assert "overlap=true" not in out, out
    assert "overlap=false" in out or "Error PDU: Try again" in out.split("label cluster")[1], out


FAILING = ScriptPmda(
    "failing",
    414,
    init="""
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(i, "i%d" % i) for i in range(50)]))
        self.add_metric(
            "failing.m", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_U32, self.indom(0), c_api.PM_SEM_INSTANT, u)
        )
        self.set_fetch_callback(self.fetch_cb)
    """,
    methods="""
    def fetch_cb(self, cluster, item, inst):
        return [1 // 0, 1]
    """,
)


def test_a_callback_failing_at_every_instance_is_logged_once(root: Path) -> None:
    """A fetch callback that raises for each of 50 instances at each of 5
    fetches: the binding prints 250 tracebacks; compat logs the failure once
    (with its traceback), then again at most once an hour."""
    under_compat(FAILING, "fetch failing.m\n" * 5, root)
    logs = [p.read_text() for p in (root / "ours").rglob("*.log")]
    text = "\n".join(logs)
    assert "ZeroDivisionError" in text, logs
    assert text.count("callback_failed") == 1, text[-2000:]
    assert text.count("Traceback (most recent call last)") == 1


RESIZE = ScriptPmda(
    "rs",
    415,
    prelude="""
    from ctypes import c_int
    from pcp.pmapi import pmErr

    OUT = []


    def attempt(what, fn):
        try:
            fn()
            OUT.append("%s:ok" % what)
        except pmErr as err:
            OUT.append("%s:%d" % (what, err.args[0]))
    """,
    init="""
        self.dict_indom = pmdaIndom(self.indom(0), {})
        self.list_indom = pmdaIndom(self.indom(1), [pmdaInstid(0, "zero")])
        self.add_indom(self.dict_indom)
        self.add_indom(self.list_indom)
        self.add_metric("rs.out", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, c_api.PM_INDOM_NULL,
                                              c_api.PM_SEM_INSTANT, u))
        self.add_metric("rs.v", pmdaMetric(self.pmid(0, 1), c_api.PM_TYPE_U32, self.indom(0),
                                            c_api.PM_SEM_INSTANT, u))
        attempt("negative", lambda: self.dict_indom.cache_resize(-1))
        attempt("list", lambda: self.list_indom.cache_resize(5))
        attempt("three", lambda: self.dict_indom.cache_resize(3))
        self.replace_indom(self.indom(0), {k: c_int(v) for k, v in (("a", 1), ("b", 2), ("c", 3))})
        attempt("below", lambda: self.dict_indom.cache_resize(1))
        attempt("wraps", lambda: self.dict_indom.cache_resize(2**32 + 3))
        self.replace_indom(self.indom(0), {k: c_int(v) for k, v in (("c", 3), ("d", 4))})
        self.set_fetch_callback(self.fetch_cb)
    """,
    methods="""
    def fetch_cb(self, cluster, item, inst):
        if item == 0:
            return [",".join(OUT), 1]
        return [inst, 1]
    """,
)

RESIZE_COMMANDS = """fetch rs.out
instance 415.0
fetch rs.v
"""


def test_cache_resize_as_the_binding_does_it(root: Path) -> None:
    """pmdaIndom.cache_resize: PM_ERR_SIGN below 0, PM_ERR_NYI for a list
    indom, PM_ERR_TOOBIG below an id in use, a C int's wrap; new ids up to
    the maximum.  compat's did nothing.  (Past the maximum libpcp_pmda 6.0
    refuses a new name and 7.x gives it maximum + 1: not compared.)  Each run
    has its own PCP_VAR_DIR: the cache file one writes is not the other's."""
    real, ours = under_both(RESIZE, RESIZE_COMMANDS, root, own_var_dirs=True)
    assert "negative:-12364,list:-21344,three:ok,below:-12444,wraps:ok" in real, real
    assert '[  0] inst: 2 name: "c"\n[  1] inst: 3 name: "d"\n' in real, real
    assert ours == real
