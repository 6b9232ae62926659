"""``evret calibrate``: measure judges against labelled judgments, or plan which judgments to label."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError, visible


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "calibrate", help="measure judges against human or id labels; plan a sample to label",
        description="Measure judges against labelled judgments (--labels, or --results with --qrels), or with "
                    "--plan N write N judgments of a results file to label, stratified over a judge's scores.")
    p.add_argument("--labels", metavar="LABELS.jsonl",
                   help="human labels: one JSON object a line with query_id, expected, retrieved_text (or doc_id "
                        "with --corpus) and label true/false")
    p.add_argument("--corpus", metavar="CORPUS.jsonl", help="texts of the doc_ids named in --labels")
    p.add_argument("--results", metavar="RESULTS.json",
                   help="a text-judged results file (evret evaluate -o): the candidates for --plan, or with "
                        "--qrels the judgments whose labels derive from ids")
    p.add_argument("--qrels", metavar="QRELS", help="TREC or BEIR qrels: a retrieved document is a match when "
                                                    "it is relevant to the query")
    p.add_argument("--judge", action="append", metavar="NAME", help="judge to measure (repeatable)")
    p.add_argument("--judge-option", action="append", metavar="[NAME:]KEY=VALUE",
                   help="judge option, for every judge or for NAME only (repeatable)")
    p.add_argument("--queries", metavar="QUERIES.tsv",
                   help="with --qrels and --corpus: graded calibration of a reference-free graded judge (relevance, "
                        "query-similarity) on every judged pair of the qrels; the query texts as TREC topics "
                        "(query-id TAB text)")
    p.add_argument("--sample", type=int, metavar="N", help="with --queries: grade N qrels pairs drawn with --seed")
    p.add_argument("--by", choices=["f1", "kappa"], default=None,
                   help="what the best threshold maximises (default f1; kappa with --queries)")
    p.add_argument("--save-threshold", metavar="CONFIG.toml",
                   help="write the best threshold of the (one) thresholded judge into this config's [judge] table "
                        "(with --queries: the fitted list of thresholds)")
    p.add_argument("--ppi-truth", metavar="TRUTH.json",
                   help="with --results: the same run scored with true labels (ids or people) on a random subset "
                        "of its queries; adds prediction-powered estimates and intervals (written with -o)")
    p.add_argument("--plan", type=int, metavar="N", help="write N judgments of --results to label, stratified "
                                                         "over the judge's scores")
    p.add_argument("-o", "--output", metavar="PATH", help="where --plan writes its JSONL ('-' for stdout), or "
                                                          "where the calibration JSON is written")
    p.add_argument("--confidence-level", type=float, default=0.95, help="level of kappa's interval (0.95)")
    p.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples for kappa (1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the plan and of the bootstrap (0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.set_defaults(func=run)


def _judges(args: argparse.Namespace) -> list[Any]:
    from evret_core.io.options import parse_options
    from evret_core.plugins.registry import create_judge

    names = args.judge or ["token-overlap"]
    shared: list[str] = []
    scoped: dict[str, list[str]] = {}
    for pair in args.judge_option or []:
        head, sep, rest = pair.partition(":")
        if sep and "=" not in head:
            if head not in names:
                raise EvretError(f"--judge-option {pair!r}: {head!r} is not one of the --judge names")
            scoped.setdefault(head, []).append(rest)
        else:
            shared.append(pair)
    return [create_judge(n, **{**parse_options(shared, "--judge-option"),
                               **parse_options(scoped.get(n), "--judge-option")}) for n in names]


def _load_results(path: str) -> Any:
    from evret_core.results.files import load_results

    return load_results(Path(path), kind="retrieval")


def check_before_work(args: argparse.Namespace) -> None:
    """Numbers in their bounds, and the output guard: -o and --save-threshold against each other and every input
    (labels, corpus, results, qrels, PPI truth, the config --save-threshold edits), before any judge is called."""
    from evret_core.io.outputs import check_outputs
    from evret_core.limits import check_bootstrap, check_int

    check_bootstrap(args.seed, args.n_resamples, args.confidence_level)
    if args.sample is not None:
        check_int(args.sample, "--sample", 1, 10**9)
    inputs = [args.labels, args.corpus, args.results, args.qrels, args.ppi_truth, args.queries]
    named = [pair.partition("=")[2] for pair in args.judge_option or []]  # a judge's cache=, a model's folder
    check_outputs({"--output": args.output}, inputs=[*inputs, args.save_threshold], options=named)
    if args.save_threshold:  # read and rewritten in place: only the other inputs may not be it
        check_outputs({"--save-threshold": args.save_threshold}, inputs=inputs, options=named)


def run(args: argparse.Namespace) -> int:
    check_before_work(args)
    if args.plan is not None:
        return _plan(args)
    if args.ppi_truth:
        return _ppi(args)
    if args.queries or args.sample is not None:
        return _graded(args)
    from evret_core.calibration import calibrate, calibration_json, read_labels
    from evret_core.calibration.label_plan import labels_from_results

    if bool(args.labels) == bool(args.results):
        raise EvretError("evret calibrate needs --labels LABELS.jsonl, or --results RESULTS.json with --qrels")
    judges = _judges(args)  # bad judge names and options fail before any file is read
    if args.labels:
        corpus = None
        if args.corpus:
            from evret_core.io.corpus import read_corpus

            corpus = read_corpus(args.corpus)
        labels = read_labels(args.labels, corpus)
    else:
        if not args.qrels:
            raise EvretError("--results without --plan needs --qrels: the ids that say which documents match")
        from evret_core.io.trec import read_qrels_file

        labels = labels_from_results(_load_results(args.results), read_qrels_file(args.qrels))
    results = calibrate(judges, labels, by=args.by or "f1", confidence_level=args.confidence_level,
                        n_resamples=args.n_resamples, seed=args.seed)
    document = calibration_json(results, labels)
    if args.save_threshold:
        document["saved"] = _save(args.save_threshold, results)
    if args.output:  # written first, printed after: a closed pipe on standard output must not lose the file
        from evret_core.io.outputs import write_output

        write_output(args.output, json.dumps(document, indent=2) + "\n", option="--output")
        if args.output == "-":
            return 0  # the JSON is standard output
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        from evret_core.calibration.table import print_calibration

        print_calibration(document)
    return 0


def _save(path: str, results: list[Any]) -> dict[str, Any]:
    from evret_core.calibration.save_threshold import current_threshold, describe, save_threshold

    thresholded = [r for r in results if r.best is not None and r.threshold_option]
    if len(thresholded) != 1:
        raise EvretError(f"--save-threshold needs exactly one thresholded judge (token-overlap, semantic) among "
                         f"--judge, got {len(thresholded)}")
    chosen = thresholded[0]
    current = current_threshold(path, chosen.judge, chosen.threshold_option)
    value = chosen.settle(keep=[current] if current is not None else [])["threshold"]
    if value != current:  # a threshold that scores as well as the best stays as the user wrote it
        save_threshold(path, chosen.judge, chosen.threshold_option, value)
    return describe(path, chosen.judge, chosen.threshold_option, value, kept=value == current)


def _graded(args: argparse.Namespace) -> int:
    """Graded calibration: the judge's grades of the qrels pairs against the qrels' grades."""
    from evret_core.calibration.grade_thresholds import calibrate_graded
    from evret_core.calibration.labels import derive_graded_labels
    from evret_core.contracts.values import grade_key
    from evret_core.io.corpus import read_corpus
    from evret_core.io.trec import read_qrels_file, read_topics

    if not (args.queries and args.qrels and args.corpus) or args.labels or args.results:
        raise EvretError("graded calibration takes --queries QUERIES.tsv, --qrels QRELS and --corpus CORPUS.jsonl "
                         "(and neither --labels nor --results)")
    judges = _judges(args)  # bad judge names and options fail before any file is read
    for judge in judges:
        if getattr(judge, "grades", None) is None or not getattr(judge, "reference_free", False):
            raise EvretError(f"--judge {judge.name}: graded calibration needs a reference-free graded judge "
                             f"(relevance, query-similarity)")
    if args.save_threshold and sum(getattr(j, "thresholds", None) is not None for j in judges) != 1:
        raise EvretError("--save-threshold with --queries needs exactly one judge with thresholds (query-similarity)")
    labels = derive_graded_labels(read_topics(args.queries), read_qrels_file(args.qrels), read_corpus(args.corpus),
                                  sample=args.sample, seed=args.seed)
    histogram: dict[str, int] = {}
    for item in labels:
        key = grade_key(float(item.grade or 0.0))
        histogram[key] = histogram.get(key, 0) + 1
    results = [calibrate_graded(j, labels, by=args.by or "kappa", n_resamples=args.n_resamples,
                                confidence_level=args.confidence_level, seed=args.seed) for j in judges]
    document: dict[str, Any] = {"labels": {"pairs": len(labels), "queries": len({i.query_id for i in labels}),
                                           "sample": args.sample, "seed": args.seed,
                                           "grades": dict(sorted(histogram.items()))},
                                "graded": results}
    if args.save_threshold:
        from evret_core.calibration.save_threshold import describe, save_threshold

        chosen = next(r for r in results if "fitted_thresholds" in r)
        save_threshold(args.save_threshold, chosen["judge"], "thresholds", chosen["fitted_thresholds"])
        document["saved"] = describe(args.save_threshold, chosen["judge"], "thresholds",
                                     chosen["fitted_thresholds"])
    if args.output:  # written first, printed after
        from evret_core.io.outputs import write_output

        write_output(args.output, json.dumps(document, indent=2) + "\n", option="--output")
        if args.output == "-":
            return 0
    if args.json:
        print(json.dumps(document, indent=2))
        return 0
    print(f"{document['labels']['pairs']} graded pairs over {document['labels']['queries']} queries "
          f"(grades: {', '.join(f'{g}: {n}' for g, n in document['labels']['grades'].items())})")
    for entry in results:
        agreement = entry["agreement"]

        def show(figure: dict[str, Any]) -> str:
            if figure["value"] is None:
                return "-"
            interval = figure.get("interval")
            return f"{figure['value']:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")

        print(f"judge {visible(entry['judge'])} (0-{entry['grades']}, {entry['unmeasured']} unmeasured): "
              f"exact {show(agreement['exact_agreement'])}, kappa {show(agreement['cohen_kappa'])}, "
              f"quadratic kappa {show(agreement['weighted_kappa']['quadratic'])}, "
              f"alpha {show(agreement['krippendorff_alpha'])}")
        for cut, figures in agreement["binary"].items():
            print(f"  relevant = grade >= {cut}: kappa {show(figures['kappa'])}")
        if "fitted_thresholds" in entry:
            print(f"  fitted thresholds: {entry['fitted_thresholds']} (given: {entry['thresholds']})")
    if "saved" in document:
        print(f"saved thresholds = {document['saved']['value']} to {document['saved']['path']}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from evret_core.calibration.label_plan import candidates_from_results, plan_sample, write_plan

    if not args.results:
        raise EvretError("--plan needs --results RESULTS.json (a text-judged run whose judgments to sample)")
    if not args.output:
        raise EvretError("--plan needs -o/--output: the JSONL file a person fills in ('-' for stdout)")
    judges = _judges(args)
    if len(judges) != 1:
        raise EvretError("--plan stratifies over one judge's scores: give one --judge")
    candidates = candidates_from_results(_load_results(args.results))
    sample = plan_sample(judges[0], candidates, args.plan, seed=args.seed)
    write_plan(args.output, sample)
    if args.output != "-":
        strata: dict[str, int] = {}
        for item in sample:
            strata[str(item.extra["stratum"])] = strata.get(str(item.extra["stratum"]), 0) + 1
        print(f"wrote {len(sample)} of {len(candidates)} judgments to label to {args.output}", file=sys.stderr)
        for name, count in sorted(strata.items()):
            print(f"  score {name}: {count}", file=sys.stderr)
    return 0


def _ppi(args: argparse.Namespace) -> int:
    from evret_core.calibration.ppi import add_prediction_powered
    from evret_core.statistics.inference import format_interval

    if not args.results:
        raise EvretError("--ppi-truth needs --results RESULTS.json: the judged run to correct")
    results = _load_results(args.results)
    truth = _load_results(args.ppi_truth)
    try:
        add_prediction_powered(results, truth, args.confidence_level)
    except EvretError as exc:  # name the file: the truth is what does not fit the run
        raise EvretError(f"--ppi-truth {args.ppi_truth}: {exc}") from None
    if args.output:  # written first, printed after
        results.to_json(Path(args.output))
        if args.output == "-":
            return 0
    if args.json:
        print(json.dumps(results.prediction_powered, indent=2))
        return 0
    print(f"{'metric':<16}{'judged (bootstrap interval)':<34}prediction-powered (covers judge error)")
    for metric, entry in results.prediction_powered.items():
        plain = format_interval(results.scores.get(metric, entry["judged"]), results.intervals.get(metric))
        print(f"{visible(metric):<16}{plain:<34}{format_interval(entry['estimate'], entry['interval'])}  "
              f"[{entry['n_labelled']} of {entry['n']} queries labelled]")
    return 0
