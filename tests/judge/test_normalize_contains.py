"""The shared normalisation, the ``contains`` judge, answer aliases through judges and the evaluator, contract 2
(threshold, batch_score) and the one default judge."""

from __future__ import annotations

import pytest

from evret_core import ContainsJudge, Evaluator, EvretError, JudgmentContext, create_judge
from evret_core.contracts.judge import Judge
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.judge import DEFAULT_JUDGE, resolve_judge
from evret_core.text import normalize, normalize_tokens


def ctx(expected: str, retrieved: str, aliases: tuple[str, ...] = ()) -> JudgmentContext:
    return JudgmentContext(query="q", expected_text=expected, retrieved_text=retrieved, aliases=aliases)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("...in 1832, at age 23", ("in", "1832", "at", "age", "23")),
        ("In 1832.", ("in", "1832")),
        ("  The\tRhine\n\n(river) ", ("the", "rhine", "river")),
        ("U.S. $1,000 don't well-known", ("u.s", "$1,000", "don't", "well-known")),
        ("ＦＵＬＬ ｗｉｄｔｈ", ("full", "width")),  # NFKC
        ("STRASSE Straße", ("strasse", "strasse")),  # casefold
        ("1832–1905 Paris/London", ("1832", "1905", "paris", "london")),  # joining dashes and slash split
        ("« Bonjour » — ¿qué?", ("bonjour", "qué")),  # punctuation-only tokens disappear
        ("", ()),
        ("!!! ...", ()),
    ],
)
def test_normalize_tokens(text: str, tokens: tuple[str, ...]) -> None:
    assert normalize_tokens(text) == tokens
    assert normalize(text) == " ".join(tokens)


def test_article_removal_is_optional() -> None:
    assert normalize("The Rhine and a map, an atlas") == "the rhine and a map an atlas"
    assert normalize("The Rhine and a map, an atlas", remove_articles=True) == "rhine and map atlas"
    assert normalize("Theme Anna", remove_articles=True) == "theme anna"  # whole tokens only


@pytest.mark.parametrize(
    ("expected", "retrieved", "verdict"),
    [
        ("1832.", "...in 1832, at age 23", True),
        ("In 1832.", "...in 1832, at age 23", True),
        ("in 1832 at", "...in 1832, at age 23", True),
        ("1832 in", "...in 1832, at age 23", False),  # order matters: a contiguous sequence
        ("age 23", "...in 1832, at age 23", True),
        ("rag", "a fragment", False),  # whole words only
        ("2", "23 items", False),
        ("France", "Normandy is a region in FRANCE.", True),
        ("10th and 11th centuries", "in the 10th and 11th centuries they", True),
        ("in the 10th century", "in 10th century", False),  # articles kept unless remove_articles
        ("...", "...", False),  # an answer that normalises to nothing matches nothing
        ("Paris", "", False),
    ],
)
def test_contains(expected: str, retrieved: str, verdict: bool) -> None:
    judge = ContainsJudge()
    assert judge.judge(ctx(expected, retrieved)) is verdict
    assert judge.batch_judge([ctx(expected, retrieved)]) == [verdict]


def test_contains_with_article_removal() -> None:
    assert ContainsJudge(remove_articles=True).judge(ctx("in the 10th century", "in 10th century"))
    assert create_judge("contains", remove_articles="true").config() == {"name": "contains", "remove_articles": True}


@pytest.mark.parametrize("name", ["exact", "contains", "token-overlap", "regex"])
def test_every_lexical_judge_matches_an_alias(name: str) -> None:
    judge = create_judge(name)
    text = "in the 10th and 11th centuries"
    assert not judge.judge(ctx("tenth century", text))
    assert judge.judge(ctx("tenth century", text, aliases=("in the 10th and 11th centuries",)))


# -- aliases in the data model --------------------------------------------------------------------------------
def test_query_example_splits_aliases_from_canonical_texts() -> None:
    q = QueryExample(query_id="q1", query_text="When?",
                     expected_answers=[["10th and 11th centuries", "in the 10th and 11th centuries",
                                        "10th and 11th centuries"], "France"])
    assert q.expected_answers == ["10th and 11th centuries", "France"]
    assert q.answer_aliases == [["10th and 11th centuries", "in the 10th and 11th centuries"], ["France"]]
    c = q.judgment_context(0, "text")
    assert c.expected_variants == ("10th and 11th centuries", "in the 10th and 11th centuries")
    assert q.judgment_context(1, "text").aliases == ()  # a one-string answer: the context (and key) as before
    assert q.judgment_context(1, "text") == JudgmentContext(query="When?", expected_text="France",
                                                           retrieved_text="text")
    # a dumped example validates back to itself
    assert QueryExample.model_validate(q.model_dump()) == q


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ([""], "expected answer 1 is empty"),
        (["ok", "   "], "expected answer 2 is empty"),
        ([[]], "expected answer 1 is an empty list of aliases"),
        ([["good", ""]], "expected answer 1 has an empty alias"),
        ([["good", 3]], "an alias must be a text"),
        ([{"x": 1}], "must be a text or a list of texts"),
    ],
)
def test_empty_answers_and_alias_lists_are_rejected_with_the_line(
    tmp_path: pytest.TempPathFactory, answers: list[object], message: str
) -> None:
    import json
    from pathlib import Path

    path = Path(str(tmp_path)) / "d.jsonl"
    path.write_text(json.dumps({"query": "fine", "expected_answers": ["x"]}) + "\n"
                    + json.dumps({"query": "bad", "expected_answers": answers}) + "\n", encoding="utf-8")
    with pytest.raises(EvretError, match=rf"d\.jsonl:2: .*{message}"):
        EvaluationDataset.from_jsonl(path)


def test_csv_rejects_an_empty_alias_list_with_the_line(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "d.csv"
    path.write_text('query,expected_answers\nok,"[[""a"", ""b""]]"\nbad,"[[]]"\n', encoding="utf-8")
    with pytest.raises(EvretError, match=r"d\.csv:3: .*empty list of aliases"):
        EvaluationDataset.from_csv(path)


def test_aliases_round_trip_through_jsonl_and_csv(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path))
    (folder / "d.csv").write_text(
        'query,expected_answers\n'
        'When were the Normans in Normandy?,"[[""10th and 11th centuries"", ""in the 10th and 11th centuries""],'
        ' ""France""]"\n'
        'Where?,Paris|Lyon\n', encoding="utf-8")
    dataset = EvaluationDataset.from_csv(folder / "d.csv")
    assert dataset.queries[0].answer_aliases == [["10th and 11th centuries", "in the 10th and 11th centuries"],
                                                 ["France"]]
    assert dataset.queries[1].answer_aliases == [["Paris"], ["Lyon"]]
    dataset.to_jsonl(folder / "d.jsonl")
    first = (folder / "d.jsonl").read_text(encoding="utf-8").splitlines()[0]
    assert '"expected_answers": [["10th and 11th centuries", "in the 10th and 11th centuries"], "France"]' in first
    again = EvaluationDataset.from_jsonl(folder / "d.jsonl")
    assert [q.model_dump() for q in again] == [q.model_dump() for q in dataset]


def test_content_hash_without_aliases_is_unchanged() -> None:
    import hashlib
    import json

    q = QueryExample(query_id="q1", query_text="x", expected_answers=["a"])
    old = {"query_id": "q1", "query_text": "x", "expected_answers": ["a"], "relevant_doc_ids": None, "tags": {}}
    digest = hashlib.sha256(json.dumps(old, sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")
    assert EvaluationDataset(queries=[q]).content_hash() == digest.hexdigest()
    with_alias = QueryExample(query_id="q1", query_text="x", expected_answers=[["a", "b"]])
    assert EvaluationDataset(queries=[with_alias]).content_hash() != digest.hexdigest()


def _results_for(retrieved: list[str], answers: list[object], judge: str = "contains") -> dict[str, float]:
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="When?", expected_answers=answers)])
    run = {"q": [{"doc_id": f"d{i}", "metadata": {"text": t}} for i, t in enumerate(retrieved)]}
    return Evaluator(run, metrics=["recall@10", "hit_rate@1", "mrr@10"], judge=judge).evaluate(dataset).scores


@pytest.mark.parametrize("matching", ["first_match", "any_match"])
def test_recall_counts_answers_not_aliases(matching: str) -> None:
    dataset = EvaluationDataset(queries=[QueryExample(
        query_id="q", query_text="When were the Normans in Normandy?",
        expected_answers=[["10th and 11th centuries", "in the 10th and 11th centuries"]])])
    run = {"q": [{"doc_id": "d1", "metadata": {"text": "They settled in the 10th and 11th centuries."}},
                 {"doc_id": "d2", "metadata": {"text": "Unrelated."}}]}
    results = Evaluator(run, metrics=["recall@10", "precision@2"], matching=matching).evaluate(dataset)
    # one answer, found once: full recall, although the passage holds both of its strings
    assert results.scores["recall@10"] == 1.0
    assert results.scores["precision@2"] == 0.5
    judgments = results.per_query["q"].judgments
    assert judgments[0].matched == [0] and judgments[1].matched == []
    # listed as two separate answers, the same strings halve the recall of a passage holding only one
    split = EvaluationDataset(queries=[QueryExample(
        query_id="q", query_text="When?", expected_answers=["10th and 11th centuries", "in 10th century"])])
    assert Evaluator(run, metrics=["recall@10"], matching=matching).evaluate(split).scores["recall@10"] == 0.5


# -- contract 2 and the default judge -------------------------------------------------------------------------
def test_default_batch_score_maps_verdicts() -> None:
    class Flaky(Judge):
        name = "flaky"

        def judge(self, context: JudgmentContext) -> bool:
            return context.retrieved_text == "yes"

        def batch_judge(self, contexts: object) -> list[bool | None]:
            return [None if c.retrieved_text == "?" else self.judge(c) for c in contexts]  # type: ignore[attr-defined]

    judge = Flaky()
    assert judge.threshold is None
    assert judge.batch_score([ctx("a", "yes"), ctx("a", "no"), ctx("a", "?")]) == [1.0, 0.0, None]
    assert judge.stats() == {} and judge.reset_stats() is None
    assert judge.plan([ctx("a", "yes"), ctx("a", "yes")])["unique"] == 1


def test_the_default_judge_is_resolved_in_one_place() -> None:
    assert DEFAULT_JUDGE == "contains"
    assert isinstance(resolve_judge(), ContainsJudge)
    assert resolve_judge("token-overlap", min_tokens=3).config()["min_tokens"] == 3
    judge = ContainsJudge()
    assert resolve_judge(judge) is judge
    with pytest.raises(EvretError, match="judge options"):
        resolve_judge(judge, remove_articles=True)
    # the evaluator uses it when no judge is named
    assert _results_for(["In 1832, at age 23"], ["1832."])["hit_rate@1"] == 1.0
