"""Trace results files (issue 36): written and read back equal, recognised by their schema, and every aggregate
re-derived from the per-hop and per-trace values when read: a tampered file is refused, naming it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.io.openinference import read_openinference
from evret_core.io.traces import apply_labels, read_labels
from evret_core.results.files import load_results
from evret_core.results.trace_results import TraceResults
from evret_core.traces.outcomes import evaluate_traces

from .._paths import REPO

EXAMPLE = REPO / "examples" / "traces"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    traces = apply_labels(read_openinference(EXAMPLE / "phoenix_spans.json"), read_labels(EXAMPLE / "labels.jsonl"))
    results = evaluate_traces(traces, ["recall@5", "ndcg@5", "hit_rate@5"], k=5, n_resamples=50,
                              config={"base_url": "https://user:PASSWORD-123@host/v1?api_key=KEY-99999999"})
    loaded: dict[str, Any] = json.loads(results.json_text())
    return loaded


def test_a_results_file_reads_back_equal_and_is_recognised(document: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    results = load_results(path)
    assert isinstance(results, TraceResults) and json.loads(results.json_text()) == document
    assert "PASSWORD-123" not in path.read_text(encoding="utf-8") and "KEY-99999999" not in json.dumps(document)
    with pytest.raises(EvretError, match=r"r\.json: is a trace results file; retrieval results are needed here"):
        load_results(path, kind="retrieval")
    view = results.score_view()
    assert view.scores["hop/recall@5"] == document["scores"]["recall@5"]
    assert view.scores["trace/right"] == pytest.approx(1 / 3, abs=1e-12)


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit


TAMPERED = [
    (_set(["queries", "t-01#1", "scores", "recall@5"], 0.0), r"scores\.recall@5 is .* but the mean of its 6"),
    (_set(["queries", "t-01#1", "scores", "recall@5"], 1.5), "outside"),
    (_set(["scores", "ndcg@5"], 0.9), r"scores\.ndcg@5 is 0\.9 but the mean"),
    (_set(["by_hop_index", "1", "n"], 4), r"by_hop_index\['1'\]\.n is 4 but 3 hops"),
    (_set(["by_hop_index", "2", "scores", "recall@5"], 0.1), r"by_hop_index\['2'\]\.scores\.recall@5 is 0\.1"),
    (_set(["by_hop_index", "2", "intervals", "recall@5"], [0.9, 0.1]), "an interval is"),
    (_set(["outcomes", "right"], 3), "outcomes is .* but the traces' outcomes count"),
    (_set(["per_trace", "t-02", "outcome"], "right"), r"per_trace\['t-02'\]: outcome 'right' .* does not follow"),
    (_set(["per_trace", "t-01", "hops", 0, "found"], False), r"per_trace\['t-01'\]\.hops\[0\]\.found is False but"),
    (_set(["per_trace", "t-03", "first_lost_hop"], 2), "does not follow from its hops"),
    (_set(["first_lost_hop"], {"2": 1}), "first_lost_hop is"),
    (_set(["hops_per_success"], 1.0), "hops_per_success is 1.0 but the traces give 2.0"),
    (_set(["hops_to_gold"], None), "hops_to_gold is None"),
    (_set(["slices", "agent", "v1", "n"], 5), "slices do not follow"),
    (_set(["per_trace", "t-01", "hops", 1, "query_id"], "t-01#1"), "is not a query of the file"),
    (_set(["confidence_level"], 1.5), "confidence level"),
    (_set(["hop_intervals", "hops_per_trace"], [1.0, 5.0]), r"hop_intervals\.hops_per_trace is \[1\.0, 5\.0\], outside"),
    (_set(["hop_intervals"], {}), "hop_intervals lacks hops_per_success"),
    (_set(["scores", "recall@1"], 0.5), "scores holds 'recall@1', which is not one of the run's metrics"),
]


@pytest.mark.parametrize(("edit", "message"), TAMPERED)
def test_a_tampered_file_is_refused_naming_it(document: dict[str, Any], tmp_path: Path,
                                              edit: Callable[[dict[str, Any]], None], message: str) -> None:
    doc = json.loads(json.dumps(document))
    edit(doc)
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(EvretError, match=message) as caught:
        load_results(path)
    assert str(caught.value).startswith(str(path))


def test_a_query_no_hop_uses_is_refused(document: dict[str, Any]) -> None:
    doc = json.loads(json.dumps(document))
    doc["queries"]["ghost#1"] = doc["queries"]["t-01#1"]
    with pytest.raises(EvretError, match="queries holds 'ghost#1', which no hop of per_trace uses"):
        TraceResults.from_json(json.dumps(doc))
