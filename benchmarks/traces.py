"""Agent traces (issue 36, T5): the OpenInference importer's throughput on a generated 10,000-span Phoenix export, and
per-hop metrics on a synthetic trace set built from MTRAG's conversations.

Run: python benchmarks/traces.py [--quick] [--out FILE.json]
     python benchmarks/traces.py --from-mtrag OUT.jsonl     (only write the MTRAG traces, for `evret trace`)

1. Import: a Phoenix span list of 1,000 agent runs x 10 spans (AGENT root, 3 TOOL, 3 RETRIEVER of 5 documents with
   text, 3 LLM), the same spans as OTLP JSON, each read by `read_openinference`; the peer is `json.loads` of the same
   file (the floor any importer pays), so the ratio is the importer's cost over parsing alone. Median of repeats.
2. MTRAG: one trace per conversation; hop i = the i-th turn that keeps a judged passage with text, its human rewrite
   retrieved by bm25 (the evret-bm25 plugin's defaults) from that domain's passages with text (a reduced corpus:
   1,488 passages instead of the 49k-183k of the upstream corpora), hop labels = the turn's qrels; the answer = the
   last turn's reference reply where the evaluation file has one (no expected answers: MTRAG's references are long
   replies). The whole trace evaluation is timed against one plain evaluator run over the same hops as flat queries
   (the peer), which must give the same per-hop scores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evret_core.evaluation.evaluator import Evaluator
from evret_core.io.openinference import read_openinference
from evret_core.io.traces import Hop, Retrieved, TraceRecord, write_traces
from evret_core.traces.hops import plan_hops
from evret_core.traces.outcomes import evaluate_traces

ROOT = Path(__file__).resolve().parents[1]
MTRAG = ROOT.parent / "shared" / "datasets" / "mtrag"
DOMAINS = ("clapnq", "cloud", "fiqa", "govt")
METRICS = ["recall@10", "ndcg@10", "hit_rate@10"]


def timed(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- 1. the importer ------------------------------------------------------------------------------------------------
def phoenix_export(runs: int) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = []

    def span(trace: str, sid: str, parent: str | None, kind: str, second: int, attrs: dict[str, Any]) -> None:
        spans.append({"name": kind.lower(), "context": {"trace_id": trace, "span_id": sid}, "span_kind": kind,
                      "parent_id": parent, "start_time": f"2026-11-20T10:{second // 60 % 60:02d}:{second % 60:02d}+00:00",
                      "end_time": f"2026-11-20T10:{second // 60 % 60:02d}:{second % 60:02d}+00:00",
                      "status_code": "OK", "attributes": attrs, "events": []})

    for r in range(runs):
        t = f"trace-{r:05d}"
        span(t, f"{t}-0", None, "AGENT", 0, {"input.value": f"question {r}", "output.value": f"answer {r}"})
        for h in range(3):
            tool, ret, llm = f"{t}-t{h}", f"{t}-r{h}", f"{t}-l{h}"
            span(t, tool, f"{t}-0", "TOOL", 10 * h + 1, {"tool.name": "search"})
            docs: dict[str, Any] = {"input.value": f"query {r} hop {h}"}
            for i in range(5):
                docs[f"retrieval.documents.{i}.document.id"] = f"doc-{(r * 7 + h * 5 + i) % 5000}"
                docs[f"retrieval.documents.{i}.document.content"] = f"passage {r} {h} {i} " + "text " * 40
                docs[f"retrieval.documents.{i}.document.score"] = 10.0 - i
            span(t, ret, tool, "RETRIEVER", 10 * h + 2, docs)
            span(t, llm, f"{t}-0", "LLM", 10 * h + 3, {"llm.output_messages.0.message.content": f"thought {h}"})
    return spans


def as_otlp(spans: list[dict[str, Any]]) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, str):
            return {"stringValue": v}
        return {"doubleValue": v} if isinstance(v, float) else {"intValue": str(v)}

    out = []
    for i, s in enumerate(spans):
        attrs = [{"key": "openinference.span.kind", "value": {"stringValue": s["span_kind"]}}]
        attrs += [{"key": k, "value": value(v)} for k, v in s["attributes"].items()]
        span = {"traceId": s["context"]["trace_id"], "spanId": s["context"]["span_id"], "name": s["name"],
                "startTimeUnixNano": str(1_700_000_000_000_000_000 + i), "attributes": attrs}
        if s["parent_id"]:
            span["parentSpanId"] = s["parent_id"]
        out.append(span)
    return {"resourceSpans": [{"scopeSpans": [{"spans": out}]}]}


def import_rows(repeats: int, folder: Path) -> list[dict[str, Any]]:
    spans = phoenix_export(1000)
    rows = []
    for shape, document in (("Phoenix span list", spans), ("OTLP JSON (camelCase)", as_otlp(spans))):
        path = folder / f"{shape.split()[0].lower()}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        traces = read_openinference(path)
        assert len(traces) == 1000 and all(len(t.hops) == 3 for t in traces)
        ours = timed(lambda p=path: read_openinference(p), repeats)  # type: ignore[misc]
        floor = timed(lambda p=path: json.loads(p.read_text(encoding="utf-8")), repeats)  # type: ignore[misc]
        rows.append({"shape": shape, "spans": len(spans), "mb": round(path.stat().st_size / 1e6, 1),
                     "import_s": round(ours, 4), "json_loads_s": round(floor, 4),
                     "spans_per_s": round(len(spans) / ours), "ratio": round(ours / floor, 2)})
    return rows


# -- 2. MTRAG traces ------------------------------------------------------------------------------------------------
def passages_with_text() -> dict[str, str]:
    texts: dict[str, str] = {}
    evaluation = json.loads((MTRAG / "evaluations" / "reference_subset_with_human_evaluations.json").read_text(
        encoding="utf-8"))
    for doc in evaluation["documents"]:
        texts[doc["document_id"]] = doc["text"]
    with (MTRAG / "generation_tasks" / "mtrag-un-reference.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            for context in json.loads(line).get("contexts", []):
                if context.get("text"):
                    texts.setdefault(context["document_id"], context["text"])
    return texts


def reference_replies() -> dict[str, str]:
    evaluation = json.loads((MTRAG / "evaluations" / "reference_subset_with_human_evaluations.json").read_text(
        encoding="utf-8"))
    return {task["task_id"]: task["targets"][0]["text"] for task in evaluation["tasks"] if task.get("targets")}


def mtrag_traces(k: int = 10) -> list[TraceRecord]:
    """One trace per MTRAG conversation that keeps a turn with a judged passage with text (see the module docs)."""
    from evret_core.contracts.kinds import RETRIEVER
    from evret_core.plugins import builder

    texts = passages_with_text()
    replies = reference_replies()
    traces = []
    for domain in DOMAINS:
        folder = MTRAG / "retrieval_tasks" / domain
        qrels: dict[str, list[str]] = {}
        for line in (folder / "qrels" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:]:
            qid, doc, score = line.split("\t")
            if float(score) > 0:
                qrels.setdefault(qid, []).append(doc)
        judged = {d for docs in qrels.values() for d in docs}
        corpus = {d: {"title": "", "text": texts[d]} for d in sorted(judged) if d in texts}
        # the domain's other passages with text: those MTRAG-UN and the evaluation file cite for this collection
        corpus.update({d: {"title": "", "text": t} for d, t in domain_extra(domain, texts).items() if d not in corpus})
        retriever = builder.build(RETRIEVER, "bm25", {"corpus": corpus})
        turns: dict[str, list[tuple[int, str, str]]] = {}
        for line in (folder / f"{domain}_rewrite.jsonl").read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            conversation, _, turn = record["_id"].partition("<::>")
            gold = [d for d in qrels.get(record["_id"], []) if d in texts]
            if gold:
                turns.setdefault(conversation, []).append((int(turn), record["text"].replace("|user|:", "").strip(),
                                                           record["_id"]))
        for conversation, kept in turns.items():
            kept.sort()
            hops = []
            for _turn, query, qid in kept:
                results = retriever.retrieve(query, k)
                hops.append(Hop(query=query, tool="bm25", hop_id=qid,
                                retrieved=tuple(Retrieved(r.doc_id, r.metadata.get("text"), r.score)
                                                for r in results),
                                relevant_doc_ids=tuple(d for d in qrels[qid] if d in texts)))
            last = kept[-1][2]
            traces.append(TraceRecord(trace_id=conversation, question=kept[-1][1], answer=replies.get(last),
                                      hops=tuple(hops), tags={"domain": domain}, conversation_id=conversation))
    return traces


def domain_extra(domain: str, texts: dict[str, str]) -> dict[str, str]:
    names = {"clapnq": "clapnq", "cloud": "ibmcloud", "fiqa": "fiqa", "govt": "govt"}
    out: dict[str, str] = {}
    with (MTRAG / "generation_tasks" / "mtrag-un-reference.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            task = json.loads(line)
            if names[domain] in str(task.get("Collection", "")).lower():
                for context in task.get("contexts", []):
                    if context.get("document_id") in texts:
                        out[context["document_id"]] = texts[context["document_id"]]
    evaluation = json.loads((MTRAG / "evaluations" / "reference_subset_with_human_evaluations.json").read_text(
        encoding="utf-8"))
    for task in evaluation["tasks"]:
        if names[domain] in str(task.get("Collection", "")).lower():
            for context in task.get("contexts", []):
                if context.get("document_id") in texts:
                    out[context["document_id"]] = texts[context["document_id"]]
    return out


def mtrag_rows(repeats: int) -> dict[str, Any]:
    traces = mtrag_traces()
    hops = sum(len(t.hops) for t in traces)
    results = evaluate_traces(traces, METRICS, 10, n_resamples=1000)
    plan = plan_hops(traces)

    def flat() -> Any:
        return Evaluator(plan.run, METRICS, k=10, n_resamples=1000).evaluate(plan.dataset)

    peer = flat()
    assert all(peer.per_query[q].scores == results.queries[q].scores for q in results.queries)
    ours = timed(lambda: evaluate_traces(traces, METRICS, 10, n_resamples=1000), repeats)
    theirs = timed(flat, repeats)
    return {"traces": len(traces), "hops": hops, "scores": results.scores, "by_hop_index": results.by_hop_index,
            "outcomes": results.outcomes, "first_lost_hop": results.first_lost_hop,
            "hops_to_gold": results.hops_to_gold, "hops_per_trace": results.hops_per_trace,
            "trace_s": round(ours, 4), "flat_s": round(theirs, 4), "ratio": round(ours / theirs, 2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--out", help="write the figures as JSON here")
    parser.add_argument("--from-mtrag", metavar="OUT.jsonl", help="only write the MTRAG traces as trace JSONL")
    args = parser.parse_args()
    if args.from_mtrag:
        traces = mtrag_traces()
        write_traces(args.from_mtrag, traces)
        print(f"{len(traces)} traces, {sum(len(t.hops) for t in traces)} hops written to {args.from_mtrag}",
              file=sys.stderr)
        return
    repeats = 3 if args.quick else 7
    print(f"$ python benchmarks/traces.py {' '.join(sys.argv[1:])}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), f"cpus={os.cpu_count()}")
    with tempfile.TemporaryDirectory() as folder:
        imports = import_rows(repeats, Path(folder))
    print("\n| export | spans | MB | read_openinference (s) | json.loads (s) | spans/s | importer / json.loads |")
    print("|---|---|---|---|---|---|---|")
    for row in imports:
        print(f"| {row['shape']} | {row['spans']:,} | {row['mb']} | {row['import_s']:.3f} | {row['json_loads_s']:.3f} "
              f"| {row['spans_per_s']:,} | {row['ratio']:.2f}x |")
    mtrag = mtrag_rows(repeats)
    print(f"\nMTRAG traces (reduced corpus): {mtrag['traces']} traces, {mtrag['hops']} hops")
    print("| hop | n | " + " | ".join(METRICS) + " |")
    print("|---|---|" + "---|" * len(METRICS))
    print("| all hops | " + f"{mtrag['hops']} | " + " | ".join(f"{mtrag['scores'][m]:.3f}" for m in METRICS) + " |")
    for number, cell in sorted(mtrag["by_hop_index"].items(), key=lambda kv: int(kv[0])):
        print(f"| hop {number} | {cell['n']} | " + " | ".join(
            f"{cell['scores'][m]:.3f} [{cell['intervals'][m][0]:.3f}, {cell['intervals'][m][1]:.3f}]"
            for m in METRICS) + " |")
    print(f"outcomes: {mtrag['outcomes']}; first lost hop: {mtrag['first_lost_hop']}; hops to gold "
          f"{mtrag['hops_to_gold']:.3f}; hops per trace {mtrag['hops_per_trace']:.3f}")
    print(f"evaluate_traces {mtrag['trace_s']:.3f} s vs one flat Evaluator run over the same hops {mtrag['flat_s']:.3f} s"
          f" = {mtrag['ratio']:.2f}x")
    if args.out:
        Path(args.out).write_text(json.dumps({"import": imports, "mtrag": mtrag}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
