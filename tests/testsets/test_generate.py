"""evret generate: sampling, generation through the LLM layer against a stub server, every filter counted, the
question set readable by evret rag, and the filters on real human questions (SQuAD 2.0 subset)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.rag import QuestionSet
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, StubRequest, isolate_llm_env
from evret_core.testing.shared_data import shared_data
from evret_core.testsets import TestsetGenerator, apply_filters, stratified_sample
from evret_core.testsets.filters import FilterReport
from evret_core.testsets.sampling import _strata, parse_mix

REPO = Path(__file__).resolve().parents[2]
_DOC = re.compile(r"<document_\d+-[0-9a-f]{16}>\n(.*?)\n</document_\d+-[0-9a-f]{16}>", re.DOTALL)

CORPUS = {
    "d1": {"title": "Queens", "text": "The queen lays up to two thousand eggs a day in summer."},
    "d2": {"title": "Drones", "text": "Drones are male bees that develop from unfertilised eggs."},
    "d3": {"title": "Wax", "text": "Worker bees secrete wax from eight glands under the abdomen."},
    "d4": {"title": "Dance", "text": "Foragers perform the waggle dance to show where flowers are."},
    "d5": {"title": "Swarms", "text": "A swarm leaves the hive with the old queen in late spring."},
    "d6": {"title": "Honey", "text": "Honey is made from nectar that bees evaporate in the comb."},
}


def responder(request: StubRequest) -> str:
    """A deterministic 'model': questions on each document's last word; d3 leaks, d4 answers off-document, d6
    is a question the closed-book check knows; every copy of the d1 question is a duplicate."""
    prompt = request.prompt
    if "own knowledge" in request.system:  # closed-book check
        return json.dumps({"answer": "nectar" if "made from" in prompt else ""})
    docs = _DOC.findall(prompt)
    if "does NOT answer" in prompt:
        return json.dumps({"question": f"Who first described: {docs[0][:30]}?"})
    text = docs[0]
    words = re.findall(r"\w+", text)
    answer = words[-1]
    if "Worker bees" in text:
        return json.dumps({"question": f"Where is the wax from the {answer}?", "answer": answer})
    if "Foragers" in text:
        return json.dumps({"question": "What do foragers show?", "answer": "pollen baskets"})
    if "Honey is made" in text:
        return json.dumps({"question": "What is honey made from?", "answer": "nectar"})
    return json.dumps({"question": f"What comes last in: {' '.join(words[1:5])}?", "answer": answer,
                       "aliases": [answer.upper()], "evidence": text})


def test_sampling_is_stratified_seeded_and_deals_the_types() -> None:
    a = stratified_sample(CORPUS, 6, seed=1)
    assert a == stratified_sample(CORPUS, 6, seed=1)
    assert [s.doc_ids for s in a] != [s.doc_ids for s in stratified_sample(CORPUS, 6, seed=2)]
    assert len({s.doc_ids[0] for s in a}) == 6  # without replacement
    assert {s.stratum for s in a} == set(_strata(CORPUS, None))  # every length quartile drawn
    assert Counter(s.qtype for s in a) == {"factoid": 3, "multi-hop": 1, "comparison": 1, "unanswerable": 1}
    assert all(len(s.doc_ids) == 2 for s in a if s.qtype in ("multi-hop", "comparison"))
    by_title = stratified_sample(CORPUS, 3, seed=0, stratify_by="title")
    assert len({s.stratum for s in by_title}) == 3


@pytest.mark.parametrize(("spec", "message"), [("factoid=x", "number"), ("trivia=1", "unknown question type"),
                                               ("factoid=0", "not all zero"), ("factoid=nan", "finite")])
def test_bad_type_mixes_name_the_option(spec: str, message: str) -> None:
    with pytest.raises(EvretError, match=message):
        parse_mix(spec)


def test_generation_filters_and_counts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "OPENAI_API_KEY")
    with StubLLMServer(responder) as server:
        generator = TestsetGenerator(CORPUS, cache=str(tmp_path / "cache.sqlite"), **stub_options(server))
        samples = stratified_sample(CORPUS, 6, seed=0, mix={"factoid": 1.0})
        result = generator.generate(6, samples=samples)
        first_calls = len(server.requests)
        again = TestsetGenerator(CORPUS, cache=str(tmp_path / "cache.sqlite"), **stub_options(server))
        assert again.generate(6, samples=samples).questions == result.questions
        assert len(server.requests) == first_calls  # every answer came from the cache: nothing paid twice
    counts = result.report.counts()
    assert counts["seen"] == 6
    assert counts["dropped"] == {"degenerate": 0, "answer_in_source": 1, "answer_leak": 1, "near_duplicate": 0,
                                 "closed_book": 1}
    assert counts["kept"] == 3 == len(result.questions)
    for q in result.questions:
        text = CORPUS[q["gold_doc_ids"][0]]["text"]
        assert q["answers"][0][0] in text and q["expected_behaviour"] == "answer"
        assert q["answers"][0][1] == q["answers"][0][0].upper()  # aliases kept
    assert first_calls == 6 + 4  # generation, then the closed-book check of the 4 that passed the filters


def test_near_duplicates_and_unanswerable_questions() -> None:
    records = [
        {"question_id": "a", "question": "What does the queen lay each day?", "answers": [["eggs"]],
         "gold_doc_ids": ["d1"]},
        {"question_id": "b", "question": "what does the queen lay each day", "answers": [["eggs"]],
         "gold_doc_ids": ["d1"]},
        {"question_id": "c", "question": "Who wrote the first bee book?", "answers": [], "gold_doc_ids": []},
    ]
    report = FilterReport()
    kept = apply_filters(records, {d: v["text"] for d, v in CORPUS.items()}, report=report)
    assert [q["question_id"] for q in kept] == ["a", "c"]
    assert report.dropped["near_duplicate"] == ["b"]


def test_cli_dry_run_and_a_run_that_evret_rag_reads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "OPENAI_API_KEY")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, **v}) + "\n" for d, v in CORPUS.items()))
    with StubLLMServer(responder) as server:
        options = stub_options(server)
        llm = ["--provider", "stub", "--model", options["model"], "--llm-option", f"base_url={options['base_url']}",
               "--llm-option", "api_key=sk-stub", "--llm-option", f"cache={tmp_path / 'c.sqlite'}"]
        assert main(["generate", "--corpus", str(corpus), "-n", "6", *llm, "--dry-run"]) == 0
        text = capsys.readouterr().out  # text, as evaluate and rag print their dry runs; JSON with --json
        assert text.startswith("dry run: 6 question(s) planned (") and "calls: 6 generation, " in text
        assert main(["generate", "--corpus", str(corpus), "-n", "6", *llm, "--dry-run", "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        assert plan["generation_calls"] == 6 and server.requests == []
        assert text.endswith(f"estimated input tokens: ~{plan['input_tokens_estimate']}\n")
        out = tmp_path / "testset.jsonl"
        assert main(["generate", "--corpus", str(corpus), "-n", "6", *llm, "--output", str(out)]) == 0
        text = capsys.readouterr().out
        assert main(["generate", "--corpus", str(corpus), "-n", "6", *llm, "--output", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert text.startswith(f"{summary['kept']} of {summary['seen']} question(s) kept; dropped: ")
    questions = QuestionSet.from_jsonl(out, corpus)
    assert len(questions) == summary["kept"] > 0
    assert {q.tags["type"] for q in questions.questions} <= {"factoid", "multi-hop", "comparison", "unanswerable"}
    assert main(["generate", "--corpus", str(corpus), "-n", "0", "--output", str(out)]) == 2
    assert "-n" in capsys.readouterr().err


def test_the_filters_pass_real_human_questions() -> None:
    """SQuAD 2.0's human-written questions are what a good generated question looks like: nearly all must pass."""
    squad = QuestionSet.from_squad(shared_data("datasets", "squad2", "dev-v2.0-subset.json",
                                               what="the SQuAD 2.0 subset"))
    records = [q.model_dump() for q in squad.questions if q.expected_behaviour == "answer"]
    report = FilterReport()
    kept = apply_filters(records, {d: squad.text_of(d) or "" for d in squad.corpus}, report=report)
    counts = report.counts()
    assert len(kept) / len(records) >= 0.97, counts
    # the contains judge wants whole words: "Rollo" in "Before Rollo's arrival" is the one answer it misses here
    assert len(report.dropped["answer_in_source"]) <= 0.01 * len(records), counts
    for qid in report.dropped["near_duplicate"]:  # a duplicate keeps its first asking
        assert qid not in {k["question_id"] for k in kept}
