"""Odd tables a script may hand the binding, compared with it under real
dbpmda: metric types PCP does not define, indoms of another domain's
number, and a script's own view of its pmdaIndom objects."""

from __future__ import annotations

from pathlib import Path

from tests.compat.harness import ScriptPmda, under_both

ODD_TYPES = ScriptPmda(
    "ot",
    417,
    prelude="CALLS = []",
    init="""
        instant = c_api.PM_SEM_INSTANT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "zero"), pmdaInstid(1, "one")]))
        self.add_indom(pmdaIndom(self.indom(1), []))
        self.add_metric("ot.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, c_api.PM_INDOM_NULL, instant, u))
        for i, t in enumerate([99, 255, 11, -2, 2**31 - 1, 2**32 + 5]):
            self.add_metric("ot.t%d" % i, pmdaMetric(self.pmid(0, i + 1), t, c_api.PM_INDOM_NULL,
                                                     c_api.PM_SEM_COUNTER, pmUnits(1, 0, 0, 1, 0, 0)))
        self.add_metric("ot.none", pmdaMetric(self.pmid(1, 0), 99, self.indom(0), instant, u))
        self.add_metric("ot.error", pmdaMetric(self.pmid(1, 1), 99, self.indom(0), instant, u))
        self.add_metric("ot.raise", pmdaMetric(self.pmid(1, 2), 99, self.indom(0), instant, u))
        self.add_metric("ot.empty", pmdaMetric(self.pmid(1, 3), 99, self.indom(1), instant, u))
        self.set_fetch_callback(self.fetch_cb)
    """,
    methods="""
    def fetch_cb(self, cluster, item, inst):
        if (cluster, item) == (0, 0):
            text = ",".join(CALLS)
            del CALLS[:]
            return [text, 1]
        CALLS.append("%d.%d[%d]" % (cluster, item, inst % 100))
        if (cluster, item) == (1, 0):
            return None
        if (cluster, item) == (1, 1):
            return [c_api.PM_ERR_INST, 0]
        if (cluster, item) == (1, 2):
            raise ValueError("a fetch callback failed")
        return [7, 1]
    """,
)

ODD_TYPE_COMMANDS = (
    "".join(f"desc 417.0.{i}\nfetch 417.0.{i}\n" for i in range(1, 7))
    + "desc ot.none\nfetch ot.none ot.error ot.raise ot.empty\nfetch ot.t0 ot.calls\nfetch ot.calls\n"
    + "children ot\nname 417.0.1\npmid ot.t1\ntext 417.0.1\n"
)


def test_a_metric_of_a_type_pcp_does_not_define_is_kept(root: Path) -> None:
    """A pmdaMetric whose type number is no PM_TYPE_* (99, 255, 11, -2, a
    C int's wrap): the binding keeps it -- its DESC gives the number, its
    name is in the PMNS, its callback is called and answers as for
    PM_TYPE_NOSUPPORT (-ENOTSUP for a value, no values for None).  compat
    dropped it (PM_ERR_PMID, no name)."""
    real, ours = under_both(ODD_TYPES, ODD_TYPE_COMMANDS, root)
    assert "Data Type: ??? (99)  InDom: PM_INDOM_NULL 0xffffffff\n    Semantics: counter  Units: Kbyte" in real, real
    assert "417.0.1 (<noname>): Operation not supported" in real, real
    assert "417.1.0 (<noname>): No values returned!" in real, real
    assert ours == real


FOREIGN = ScriptPmda(
    "fd",
    418,
    prelude="""
    def foreign(domain, serial):
        return (domain << 22) | serial
    """,
    init="""
        instant = c_api.PM_SEM_INSTANT
        # only another domain's indom of serial 0
        self.add_indom(pmdaIndom(foreign(5, 0), [pmdaInstid(0, "x"), pmdaInstid(1, "y")]))
        self.add_metric("fd.a", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_U32, foreign(5, 0), instant, u))
        # the PMDA's own indom of serial 1, then another domain's
        self.add_indom(pmdaIndom(self.indom(1), [pmdaInstid(10, "own10"), pmdaInstid(11, "own11")]))
        self.add_indom(pmdaIndom(foreign(5, 1), [pmdaInstid(20, "f20")]))
        self.add_metric("fd.b_own", pmdaMetric(self.pmid(0, 1), c_api.PM_TYPE_U32, self.indom(1), instant, u))
        self.add_metric("fd.b_foreign", pmdaMetric(self.pmid(0, 2), c_api.PM_TYPE_U32, foreign(5, 1), instant, u))
        # another domain's indom of serial 2 first, then the PMDA's own
        self.add_indom(pmdaIndom(foreign(7, 2), [pmdaInstid(30, "f30")]))
        self.add_indom(pmdaIndom(self.indom(2), [pmdaInstid(40, "own40")]))
        self.add_metric("fd.c_foreign", pmdaMetric(self.pmid(0, 3), c_api.PM_TYPE_U32, foreign(7, 2), instant, u))
        self.add_metric("fd.c_own", pmdaMetric(self.pmid(0, 4), c_api.PM_TYPE_U32, self.indom(2), instant, u))
        # a metric of another domain's indom never added, beside the PMDA's own of its serial
        self.add_indom(pmdaIndom(self.indom(3), [pmdaInstid(50, "own50")]))
        self.add_metric("fd.d_unadded", pmdaMetric(self.pmid(0, 5), c_api.PM_TYPE_U32, foreign(9, 3), instant, u))
        self.add_metric("fd.d_own", pmdaMetric(self.pmid(0, 6), c_api.PM_TYPE_U32, self.indom(3), instant, u))
        self.set_fetch_callback(lambda cluster, item, inst: [inst, 1])
    """,
)

FOREIGN_COMMANDS = (
    "".join(f"desc 418.0.{i}\nfetch 418.0.{i}\n" for i in range(7))
    + "".join(f"instance {i}\n" for i in ("5.0", "418.0", "418.1", "5.1", "7.2", "418.2", "418.3"))
    + 'instance 5.1 20\ninstance 7.2 "f30"\nfetch fd.b_own fd.b_foreign fd.c_foreign fd.c_own\nchildren fd\n'
    + "label instances 5.1\nlabel indom 5.1\ntext indom 5.1\ninstance 9.3\nlabel instances 9.3\n"
)


def test_an_indom_of_another_domain_number_is_kept(root: Path) -> None:
    """An indom made with another domain's number (5.1 beside the PMDA's
    418.1): the binding keeps it and its metrics as the script made them --
    a DESC gives that indom, INSTANCE answers for that number (and for the
    PMDA's own number only what the script added with it), a metric of
    such an indom never added has no values (INSTANCE for that indom:
    PM_ERR_INDOM, its instance labels no sets).  compat kept one indom per
    serial and dropped the metrics of the others (PM_ERR_PMID, no name),
    and gave a lone other-domain indom the PMDA's number."""
    real, ours = under_both(FOREIGN, FOREIGN_COMMANDS, root)
    assert "InDom: 5.1 0x1400001" in real and "InDom: 9.3 0x2400003" in real, real
    assert 'pmInDom: 5.1\n[  0] inst: 20 name: "f20"\n' in real, real
    assert "pmInDom: 418.0\nError PDU: Unknown or illegal instance domain identifier" in real, real
    assert "pmInDom: 9.3\nError PDU: Unknown or illegal instance domain identifier" in real, real
    assert ours == real


ITERATION = ScriptPmda(
    "it",
    419,
    prelude="""
    from ctypes import c_int

    OUT = []


    def walk(what, indom):
        OUT.append("%s=%s" % (what, ";".join("%d:%s" % pair for pair in indom)))
    """,
    init="""
        listed = pmdaIndom(self.indom(0), [pmdaInstid(0, "a"), pmdaInstid(1, ""), pmdaInstid(2, "c"),
                                           pmdaInstid(2, "dup"), pmdaInstid(3, "")])
        self.add_indom(listed)
        walk("list", listed)
        self.undecided = pmdaIndom(self.indom(1), None)
        self.add_indom(self.undecided)
        walk("none", self.undecided)
        self.replace_indom(self.indom(1), {"p": c_int(1), "q": c_int(2)})
        walk("none_after_dict", self.undecided)
        empty = pmdaIndom(self.indom(2), [])
        self.add_indom(empty)
        walk("empty", empty)
        cached = pmdaIndom(self.indom(3), {"x": c_int(1), "y": c_int(2)})
        self.add_indom(cached)
        walk("dict", cached)
        walk("other_none", pmdaIndom(self.indom(3), None))
        walk("other_empty_list", pmdaIndom(self.indom(3), []))
        self.add_metric("it.out", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, c_api.PM_INDOM_NULL,
                                              c_api.PM_SEM_INSTANT, u))
        self.set_fetch_callback(self.fetch_cb)
    """,
    methods="""
    def fetch_cb(self, cluster, item, inst):
        walk("at_fetch", self.undecided)
        text = ",".join(OUT)
        del OUT[:]
        return [text, 1]
    """,
)


def test_iterating_a_pmdaindom_as_the_binding_does(root: Path) -> None:
    """A script's own iteration of its pmdaIndom objects: the binding
    yields an array indom's ids each with the name its first entry gives
    (a repeated id twice with its first name), skipping instances whose name
    is empty; an indom of no entries (made with None or []) walks the
    pmdaCache of its number, so it yields what a dict indom of that number
    holds.  compat yielded every entry as listed, empty names too, and
    nothing for such an indom.  Each run has its own PCP_VAR_DIR (the
    dict indoms' cache files)."""
    real, ours = under_both(ITERATION, "fetch it.out\n", root, own_var_dirs=True)
    assert 'value "list=0:a;2:c;2:c,' in real, real
    assert "none_after_dict=0:p;1:q," in real, real
    assert ours == real


UNKNOWN_LABELS = ScriptPmda(
    "ul",
    420,
    prelude="CALLS = []",
    init="""
        instant = c_api.PM_SEM_INSTANT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "a"), pmdaInstid(1, "b")]))
        self.add_metric("ul.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, c_api.PM_INDOM_NULL, instant, u))
        self.add_metric("ul.x", pmdaMetric(self.pmid(0, 1), c_api.PM_TYPE_U32, self.indom(0), instant, u))
        self.set_fetch_callback(self.fetch_cb)
        self.set_label(self.label_cb)
        self.set_label_callback(self.inst_label_cb)
        self.set_instance(lambda serial: CALLS.append("instance(%d)" % serial))
    """,
    methods="""
    def fetch_cb(self, cluster, item, inst):
        text = ",".join(CALLS)
        del CALLS[:]
        return [text, 1]

    def label_cb(self, ident, type):
        CALLS.append("label(%#x,%d)" % (ident & 0xffffffff, type))
        if type == c_api.PM_LABEL_INDOM and ident == self.indom(9):
            raise KeyError(ident)  # as pmdasimple's label callback fails for an indom it does not have
        return '{"t":%d}' % type

    def inst_label_cb(self, indom, inst):
        CALLS.append("ilabel(%#x,%d)" % (indom, inst))
        return '{"i":%d}' % inst
    """,
)

UNKNOWN_LABEL_COMMANDS = "".join(
    f"label {what}\nfetch ul.calls\n"
    for what in (
        "indom 420.7",
        "indom 420.9",
        "item 420.3.3",
        "cluster 420.3",
        "instances 420.7",
        "instances 420.0",
        "indom 420.0",
        "item ul.x",
        "cluster 420.0",
        "domain",
    )
)


def test_labels_of_ids_the_pmda_does_not_have(root: Path) -> None:
    """The binding asks the script's label callback about any indom,
    cluster or PMID, one the PMDA has or not, and answers what it gives (its
    failure: -EAGAIN); for the instances level it asks ``label(indom,
    PM_LABEL_INSTANCES)`` (an answer dropped), then the label callback per
    instance, none for an indom it does not have (no sets), and not the
    instance callback; for the domain, the label callback once, about the
    request's ident.  compat answered PM_ERR_INDOM and PM_ERR_PMID without
    asking, no sets for an unknown cluster, ran the instance callback
    before instance labels, and asked about the domain twice."""
    real, ours = under_both(UNKNOWN_LABELS, UNKNOWN_LABEL_COMMANDS, root)
    assert "pmInDom: 420.7\nLabels:\n    t=4\n" in real, real
    assert 'value "label(0x69000007,4)"' in real, real
    assert "pmInDom: 420.9\nError PDU: Resource temporarily unavailable" in real, real
    assert "PMID: 420.3.3\nLabels:\n    t=16\n" in real, real
    assert "Cluster: 420.3\nLabels:\n    t=8\n" in real and 'value "label(0x3,8)"' in real, real
    assert "Instances of pmInDom: 420.7\nInfo: __pmDecodeLabel() returns 0 label sets" in real, real
    assert 'value "label(0x69000007,32)"' in real, real
    assert 'value "label(0x69000000,32),ilabel(0x69000000,0),ilabel(0x69000000,1)"' in real, real
    assert 'value "label(0xffffffff,2)"' in real, real
    assert ours == real


NEVER_ADDED = ScriptPmda(
    "na",
    421,
    prelude="CALLS = []",
    init="""
        instant = c_api.PM_SEM_INSTANT
        # no add_indom at all: libpcp_pmda's start checks a metric's indom only against added ones
        self.add_metric("na.calls", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_STRING, c_api.PM_INDOM_NULL, instant, u))
        self.add_metric("na.x", pmdaMetric(self.pmid(0, 1), c_api.PM_TYPE_U32, self.indom(1), instant, u))
        self.set_fetch_callback(self.fetch_cb)
        self.set_instance(lambda serial: CALLS.append("instance(%d)" % serial))
        self.set_label(lambda ident, type: CALLS.append("label(%#x,%d)" % (ident, type)) or "{}")
        self.set_label_callback(lambda indom, inst: CALLS.append("ilabel(%d)" % inst) or "{}")
    """,
    methods="""
    def fetch_cb(self, cluster, item, inst):
        if item == 1:
            CALLS.append("x[%d]" % inst)
            return [inst, 1]
        text = ",".join(CALLS)
        del CALLS[:]
        return [text, 1]
    """,
)

NEVER_ADDED_COMMANDS = "".join(
    f"{command}\nfetch na.calls\n"
    for command in (
        "desc na.x",
        "fetch na.x",
        "instance 421.1",
        'instance 421.1 "a"',
        "instance 421.1 0",
        "label instances 421.1",
        "label indom 421.1",
        "instance 421.5",
    )
)


def test_an_indom_a_metric_names_but_the_script_never_added(root: Path) -> None:
    """A metric's indom the script never added (possible when it added
    none): the binding serves the metric (no values), and INSTANCE for that
    indom runs the instance callback, then answers PM_ERR_INDOM, as for an
    indom nothing names; its instance labels are no sets (the label
    callback asked at the instances level, never the instance callback).
    compat answered INSTANCE with an empty indom, and ran the instance
    callback for its instance labels."""
    real, ours = under_both(NEVER_ADDED, NEVER_ADDED_COMMANDS, root)
    assert "InDom: 421.1 0x69400001" in real and "421.0.1 (<noname>): No values returned!" in real, real
    assert "pmInDom: 421.1\nError PDU: Unknown or illegal instance domain identifier\nfetch na.calls" in real, real
    assert real.count('value "instance(1)"') == 3 and 'value "instance(5)"' in real, real
    assert "Instances of pmInDom: 421.1\nInfo: __pmDecodeLabel() returns 0 label sets" in real, real
    assert 'value "label(0x69400001,32)"' in real, real
    assert ours == real


UNDEFINED_SERIAL = ScriptPmda(
    "us",
    422,
    prelude="import time",
    init="""
        instant = c_api.PM_SEM_INSTANT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "a")]))
        self.add_metric("us.a", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_U32, self.indom(0), instant, u))
        self.add_metric("us.b", pmdaMetric(self.pmid(0, 1), c_api.PM_TYPE_U32, self.indom(1), instant, u))
        self.set_fetch_callback(lambda cluster, item, inst: [inst, 1])
    """,
    methods="""
    def run(self):
        PMDA.run(self)
        self.log("run() returned")
        time.sleep(1)  # the pipe stays open a while: dbpmda's first request is sent, then finds it closed
    """,
)


def test_a_metric_of_an_indom_serial_no_added_indom_has(root: Path) -> None:
    """A metric whose indom's serial is that of no indom the script added
    (when it added any): libpcp_pmda's start refuses the tables, logs why
    and that its initialisation failed, and the binding's ``run()`` returns
    without serving pmcd (the script goes on after it; its end closes the
    pipe).  compat served the script.  It now refuses the same way, with a
    log line of its own saying why."""
    # (PMIDs, not names: dbpmda would ask the agent for a name first)
    real, ours = under_both(UNDEFINED_SERIAL, "desc 422.0.0\nfetch 422.0.0\n", root)
    assert "PMID: 422.0.0\nError: __pmGetPDU() failed: PDU empty, PMDA may have died" in real, real
    assert "Error: __pmSendProfile() failed: Broken pipe" in real and "InDom" not in real, real
    real_log = (root / "real" / "us.log").read_text()
    assert "Undefined instance domain serial (1) specified for metric 422.0.1" in real_log, real_log
    assert "PMDA Initialisation Failed" in real_log and "run() returned" in real_log, real_log
    assert ours == real
    our_log = (root / "ours" / "us.log").read_text()
    assert "metric 422.0.1 (us.b) names instance domain serial 1, which no added indom has" in our_log, our_log
    assert "run() returned" in our_log and "serving" not in our_log, our_log


FAILING_INSTANCE = ScriptPmda(
    "fi",
    423,
    init="""
        instant = c_api.PM_SEM_INSTANT
        self.add_indom(pmdaIndom(self.indom(0), [pmdaInstid(0, "a"), pmdaInstid(1, "b")]))
        self.add_metric("fi.a", pmdaMetric(self.pmid(0, 0), c_api.PM_TYPE_U32, self.indom(0), instant, u))
        self.set_fetch_callback(lambda cluster, item, inst: [inst + 7, 1])
        self.set_instance(self.instance_cb)
    """,
    methods="""
    def instance_cb(self, serial):
        raise ValueError("no instances today (serial %d)" % serial)
    """,
)


def test_an_instance_callback_that_raises(root: Path) -> None:
    """The binding answers an INSTANCE request whose instance callback
    raised with PM_ERR_AGAIN (logging that the callback failed), for an
    indom the script added and one it did not; the FETCH, which does not
    call it, is served.  compat logged the failure and answered from the
    indom's instances."""
    real, ours = under_both(FAILING_INSTANCE, "instance 423.0\ninstance 423.5\nfetch fi.a\n", root)
    for indom in ("423.0", "423.5"):
        assert f"pmInDom: {indom}\nError PDU: Resource temporarily unavailable\n" in real, real
    assert "inst [1 or ???] value 8 " in real, real
    assert "preinstance: callback failed" in (root / "real" / "fi.log").read_text()
    assert ours == real
    our_log = (root / "ours" / "fi.log").read_text()
    assert "no instances today (serial 0)" in our_log and "(serial 5)" in our_log, our_log
