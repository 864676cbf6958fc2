"""Every label set the OpenMetrics table answers is one PCP takes.

PCP's decoders (p_label.c) refuse a label set of 255 labels or more, or of
64 KiB of JSON or more; the dispatcher then answers the whole LABEL request
PM_ERR_TOOBIG (and logs it, every time it is asked).  A source's labels are
bounded in characters per value and per line, but JSON escapes a control
character as six bytes, and a metric's item labels gather every instance's
label names.  A series whose labels PCP could not carry is refused (as a
series past any other bound), a label past the item set's bounds is left out,
each logged once while it lasts; the other series and metrics keep theirs."""

from __future__ import annotations

from pathlib import Path

import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from pmda_py.openmetrics import NameTable, SourceModel, parse_document
from pmda_py.openmetrics.labels import MAX_SET_JSON, MAX_SET_LABELS, label_items
from pmda_py.openmetrics.table import OpenMetricsTable
from pmda_py.pmapi import LabelType
from pmda_py.testing.harness import open_table_pmda
from pmda_py.wire import LabelSet

#: a line just under the 64 KiB line bound whose label values are control characters: 56 000
#: characters, over 330 000 bytes of JSON
WIDE = "wide{" + ",".join(f'l{i}="{chr(1) * 4000}"' for i in range(14)) + "} 1"


def _document() -> str:
    lines = [WIDE, 'wide{k="fine"} 2']
    lines += [f'many{{n{i}="x"}} {i}' for i in range(300)]  # 300 label names across one metric's instances
    lines.append("after 7")
    return "\n".join(lines) + "\n"


def _fits(s: LabelSet) -> bool:
    return len(s.labels) <= MAX_SET_LABELS and len(s.json) <= MAX_SET_JSON


async def test_label_sets_pcp_cannot_carry_are_never_answered(tmp_path: Path) -> None:
    (tmp_path / "doc.txt").write_text(_document())
    conf = tmp_path / "config.d"
    conf.mkdir()
    (conf / "s.url").write_text(f"file://{tmp_path / 'doc.txt'}\n")
    table = OpenMetricsTable(dir=str(conf), state_dir=str(tmp_path / "state"), interval="60", workers="0")
    with structlog.testing.capture_logs() as logs:
        async with open_table_pmda(table, mount="openmetrics", domain=144) as pmda:
            await table.wait_ready()
            names = ["openmetrics.s.wide", "openmetrics.s.many", "openmetrics.s.after"]
            values = await pmda.fetch_values(names)
            assert values["openmetrics.s.after"] == 7.0
            for name in names[:2]:
                pmid = (await pmda.lookup([name]))[name]
                indom = (await pmda.desc(pmid)).indom
                item = await pmda.label(pmid, LabelType.ITEM)  # (PM_ERR_TOOBIG raised here, before)
                insts = await pmda.label(indom, LabelType.INSTANCES)
                assert all(_fits(s) for s in (*item.sets, *insts.sets)), name
                if name.endswith("wide"):
                    # the series PCP could not label is refused; the other keeps its value and label
                    assert list(values[name].values()) == [2.0]
                    labels = [s.as_dict() for s in insts.sets]
                    assert [{k: v for k, v in d.items() if k != "instname"} for d in labels] == [{"k": '"fine"'}]
                else:
                    assert len(values[name]) == 300 and len(insts.sets) == 300
    assert not [e for e in logs if e["event"] in ("label_set_too_big", "reply_too_big")]
    parse = [e["problem"] for e in logs if e["event"] == "openmetrics_parse"]
    assert len([p for p in parse if "label set" in p]) == 2, parse  # one line for each, not one per request


#: a label value: JSON makes 6 bytes of a control character, 3 of a euro sign, 2 of a quote (no line ends)
_values = st.text(st.sampled_from(["\x01", "\x1f", "a", "\u00e9", "\u20ac", '"', "\\", "\n"]), max_size=4000)


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@settings(max_examples=40)
@given(
    st.integers(1, 400),  # series
    st.integers(1, 64),  # labels of each
    st.booleans(),  # every series with label names of its own (else the same names)
    st.lists(_values, min_size=1, max_size=8),  # values, taken in turn
)
def test_a_models_label_sets_always_fit(n: int, per: int, own_names: bool, values: list[str]) -> None:
    """Whatever label sets a document brings, the model keeps none PCP
    would refuse: each instance's, with the ``instname`` label pmdaopenmetrics
    < 6.1 adds, and the metric's item labels."""
    most = 30000 // per  # (escaped, a value at most doubles: every line under the 64 KiB bound)
    lines = []
    for k in range(n):
        labels = {f"l{k}_{j}" if own_names else f"l{j}": values[(k + j) % len(values)][:most] for j in range(per - 1)}
        body = ",".join(f'{name}="{_escaped(v)}"' for name, v in {**labels, "series": str(k)}.items())
        lines.append(f"m{{{body}}} {k}")
    parsed = parse_document("\n".join(lines) + "\n")
    assert parsed.error is None and len(parsed.samples) == n
    model = SourceModel("s", 1, NameTable(1023), lambda _s, n: NameTable(n))
    model.ingest(parsed.samples)
    for m in model.metrics.values():
        item = label_items(m.item_labels(), 0) + label_items(m.optional or {}, 0)
        assert _fits(LabelSet.from_items(item))
        assert m.table is not None
        for inst, pairs in m.inst_labels.items():
            inst_items = label_items(dict(zip(pairs[::2], pairs[1::2])), 0, skip="instname")
            inst_items += label_items({"instname": f"{inst} {m.table.names[inst]}"}, 0)
            assert _fits(LabelSet.from_items(inst_items)), inst
