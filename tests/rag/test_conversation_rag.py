"""The RAG harness over conversation datasets (evret_core/rag/turns.py and the harness's turn path): the turns
labelled for generation become questions, retrieval uses the query form's text while the generator sees the user's
message, every request of a turn carries its reference history, the claim judges see it as --claims-history says,
intervals and tests resample whole conversations, the turn fields and the attribution by turn index reach the
results file (and single questions' files stay as they were), and evret rag runs on MTRAG-UN."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from evret_core.contracts.claims import ClaimTask, ClaimVerdict
from evret_core.contracts.conversation import Turn
from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Answer, GenerationRequest, Generator
from evret_core.contracts.retrieve import RetrievalResult, Retriever
from evret_core.conversation.forms import HistoryWindow
from evret_core.io.conversations import ConversationSet
from evret_core.rag import QuestionSet, RagEvaluator, RagResults
from evret_core.rag.turns import TurnQuestions, turn_questions
from evret_core.statistics.clustered import (
    cluster_bootstrap_intervals,
    cluster_paired_p_value,
    number_clusters,
)
from evret_core.testing.shared_data import repo_root, shared_data

CORPUS = {
    "d1": {"title": "", "text": "The capital of France is Paris."},
    "d2": {"title": "", "text": "Paris has about two million inhabitants."},
    "d3": {"title": "", "text": "The capital of Italy is Rome."},
    "d4": {"title": "", "text": "Rome has about three million inhabitants."},
}
CONVERSATIONS = [
    {"conversation_id": "c1", "tags": {"domain": "geo"}, "turns": [
        {"user": "What is the capital of France?", "agent": "Paris.", "expected_answers": ["Paris"],
         "relevant_doc_ids": ["d1"], "rewrite": "capital of France"},
        {"user": "How many people live there?", "agent": "About two million.", "expected_answers": ["two million"],
         "relevant_doc_ids": ["d2"], "rewrite": "How many people live in Paris?"},
        {"user": "Thanks!", "agent": "You're welcome."},
    ]},
    {"conversation_id": "c2", "turns": [
        {"user": "And the capital of Italy?", "agent": "Rome.", "expected_answers": ["Rome"],
         "relevant_doc_ids": ["d3"], "tags": {"kind": "factoid"}},
        {"user": "How many live there?", "expected_answers": ["three million"], "relevant_doc_ids": ["d4"]},
    ]},
]
PLAIN = QuestionSet.from_records([
    {"id": "q1", "question": "What is the capital of France?", "answers": ["Paris"], "gold_doc_ids": ["d1"]},
    {"id": "q2", "question": "And the capital of Italy?", "answers": ["Rome"], "gold_doc_ids": ["d3"]},
], corpus=CORPUS)


def write_conversations(folder: Path, conversations: list[dict[str, object]] = CONVERSATIONS) -> Path:
    path = folder / "conversations.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in conversations), encoding="utf-8")
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, **v}) + "\n" for k, v in CORPUS.items()),
                                         encoding="utf-8")
    return path


@pytest.fixture
def turns(tmp_path: Path) -> TurnQuestions:
    path = write_conversations(tmp_path)
    return turn_questions(ConversationSet.from_jsonl(path, tmp_path / "corpus.jsonl"))


class Recording(Generator):
    """Answers with the first context's last word and keeps every request it was given."""

    name = "recording"

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    def generate(self, request: GenerationRequest) -> Answer | None:
        self.requests.append(request)
        if not request.contexts:
            return Answer(refused=True)
        return Answer(text=request.contexts[0].text.rstrip(".").split()[-1])


class Asked(Retriever):
    """Returns every document, d1 first, and keeps the query texts it was asked."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        self.queries.append(query)
        return [RetrievalResult(doc_id=doc_id, score=1.0 - i / 10, metadata={"text": CORPUS[doc_id]["text"]})
                for i, doc_id in enumerate(CORPUS)][:k]


class Judged:
    """A claim judge that calls every claim supported and keeps the tasks it was given."""

    name = "judged"

    def __init__(self) -> None:
        self.tasks: list[ClaimTask] = []

    def judge_claims(self, tasks: Sequence[ClaimTask]) -> list[list[ClaimVerdict]]:
        self.tasks.extend(tasks)
        return [[ClaimVerdict(c.text, list(c.citations), "supported") for c in t.claims] for t in tasks]


def test_the_generation_turns_become_questions(turns: TurnQuestions) -> None:
    assert [q.question_id for q in turns.questions] == ["c1:1", "c1:2", "c2:1", "c2:2"]
    first, second = turns.questions[0], turns.questions[1]
    assert first.question == "What is the capital of France?" and first.answers == [["Paris"]]
    assert second.gold_doc_ids == ["d2"]
    assert second.tags == {"domain": "geo", "turn_index": "2"}
    assert turns.questions[2].tags == {"kind": "factoid", "turn_index": "1"}
    assert all("c1" not in q.tags.values() and "c2" not in q.tags.values() for q in turns.questions)
    info = turns.turns["c1:2"]
    assert (info.conversation_id, info.turn_index) == ("c1", 2)
    assert info.history == (Turn("user", "What is the capital of France?"), Turn("agent", "Paris."))
    assert turns.turns["c1:1"].history == ()
    assert turns.text_of("d1") == CORPUS["d1"]["text"]


def test_a_turn_request_carries_its_history_and_a_single_question_none(turns: TurnQuestions) -> None:
    generator = Recording()
    RagEvaluator(Asked(), generator, k=2, n_resamples=20).evaluate(turns)
    by_id = {(r.question_id, r.condition): r for r in generator.requests}
    assert len(by_id) == 8
    request = by_id[("c2:2", "retrieved")]
    assert request.question == "How many live there?"
    assert request.history == (Turn("user", "And the capital of Italy?"), Turn("agent", "Rome."))
    assert by_id[("c1:1", "gold")].history == ()
    plain = Recording()
    RagEvaluator(Asked(), plain, k=2, n_resamples=20).evaluate(PLAIN)
    assert plain.requests and all(r.history == () for r in plain.requests)
    # a single question's request is the one it always was (same fields, so the same cache keys)
    assert plain.requests[0] == GenerationRequest("q1", "What is the capital of France?",
                                                  plain.requests[0].contexts, "gold")


@pytest.mark.parametrize(("form", "expected"), [
    ("last_turn", "How many people live there?"),
    ("full_history", "What is the capital of France?\nHow many people live there?"),
    ("rewrite", "How many people live in Paris?"),
])
def test_the_query_form_chooses_the_retrieval_text_not_the_question(turns: TurnQuestions, form: str,
                                                                    expected: str) -> None:
    retriever, generator = Asked(), Recording()
    RagEvaluator(retriever, generator, k=2, n_resamples=20, query_form=form).evaluate(turns)
    if form == "rewrite":  # c2's turns have no rewrite: not retrieved, skipped under retrieved
        assert retriever.queries == ["capital of France", expected]
    else:
        assert retriever.queries[1] == expected
    asked = {r.question_id: r.question for r in generator.requests if r.condition == "retrieved"}
    assert asked["c1:2"] == "How many people live there?"


def test_a_turn_without_text_in_its_form_is_skipped_and_reported(turns: TurnQuestions) -> None:
    results = RagEvaluator(Asked(), Recording(), k=2, n_resamples=20, query_form="rewrite").evaluate(turns)
    assert results.unmeasured["retrieval_no_query"] == ["c2:1", "c2:2"]
    assert results.per_question["c2:1"].conditions["retrieved"].skipped is not None
    assert results.per_question["c2:1"].conditions["gold"].answer is not None
    assert results.unmeasured["skipped"] == {"retrieved": ["c2:1", "c2:2"]}


def test_the_full_history_window_is_the_one_given(turns: TurnQuestions) -> None:
    retriever = Asked()
    RagEvaluator(retriever, Recording(), k=2, n_resamples=20, query_form="full_history",
                 history_window=HistoryWindow(roles="all", max_words=6)).evaluate(turns)
    assert retriever.queries[1] == "Paris.\nHow many people live there?"


def test_a_rewriter_makes_the_queries_through_the_executor(turns: TurnQuestions) -> None:
    from evret_core.plugins.registry import create_rewriter

    retriever = Asked()
    results = RagEvaluator(retriever, Recording(), k=2, n_resamples=20, query_form="rewriter",
                           rewriter=create_rewriter("carry-terms")).evaluate(turns)
    assert len(retriever.queries) == 4 and retriever.queries[1] != "How many people live there?"
    assert "France" in retriever.queries[1]
    assert results.config["conversation"]["rewriter"]["name"] == "carry-terms"


@pytest.mark.parametrize(("mode", "roles"), [("all", ["user", "agent"]), ("user", ["user"]), ("none", [])])
def test_the_claim_judges_see_the_history_claims_history_keeps(turns: TurnQuestions, mode: str,
                                                               roles: list[str]) -> None:
    judge = Judged()
    RagEvaluator(Asked(), Recording(), k=2, n_resamples=20, claim_judge=judge, claims_history=mode,
                 relevance="none").evaluate(turns)
    by_question = {t.question: t for t in judge.tasks}
    assert [t.role for t in by_question["How many live there?"].history] == roles
    assert by_question["What is the capital of France?"].history == ()


def test_a_single_question_claim_task_has_no_history() -> None:
    judge = Judged()
    RagEvaluator(Asked(), Recording(), k=2, n_resamples=20, claim_judge=judge, relevance="none").evaluate(PLAIN)
    assert judge.tasks and all(t.history == () for t in judge.tasks)


def test_intervals_and_tests_resample_whole_conversations(turns: TurnQuestions) -> None:
    results = RagEvaluator(Asked(), Recording(), k=2, n_resamples=200, seed=3).evaluate(turns)
    assert results.clustered
    outcomes = list(results.per_question.values())
    clusters, _ = number_clusters([q.conversation_id or "" for q in outcomes])
    f1 = np.array([q.conditions["retrieved"].scores["f1"] for q in outcomes], dtype=float)
    assert results.generation_intervals["retrieved"]["f1"] == cluster_bootstrap_intervals(
        {"v": f1}, clusters, 0.95, 200, 3)["v"]
    gold = np.array([q.conditions["gold"].scores["f1"] for q in outcomes], dtype=float)
    difference = next(d for d in results.differences if d.metric == "f1")
    assert difference.interval == cluster_bootstrap_intervals({"v": f1 - gold}, clusters, 0.95, 200, 3)["v"]
    assert difference.p_value == cluster_paired_p_value(gold, f1, clusters, seed=3)
    plain = RagEvaluator(Asked(), Recording(), k=2, n_resamples=200, seed=3).evaluate(PLAIN)
    assert not plain.clustered and all(d.p_value is None for d in plain.differences)


def test_the_turn_fields_and_attribution_by_turn_index_are_written_and_checked(turns: TurnQuestions,
                                                                               tmp_path: Path) -> None:
    results = RagEvaluator(Asked(), Recording(), k=2, n_resamples=20).evaluate(turns)
    q = results.per_question["c2:2"]
    assert (q.conversation_id, q.turn_index) == ("c2", 2)
    by_index = results.attribution_by_turn_index
    assert list(by_index) == ["1", "2"] and sum(by_index["2"].values()) == 2
    assert sum(sum(row.values()) for row in by_index.values()) == sum(results.attribution.values())
    path = tmp_path / "results.json"
    results.to_json(path)
    data = json.loads(path.read_text())
    assert data["per_question"]["c2:2"]["conversation_id"] == "c2" and data["per_question"]["c2:2"]["turn_index"] == 2
    assert all("p_value" in d for d in data["differences"])
    assert RagResults.from_json(path).attribution_by_turn_index == by_index
    data["attribution_by_turn_index"]["2"]["both_right"] += 1
    path.write_text(json.dumps(data))
    with pytest.raises(EvretError, match="attribution_by_turn_index does not count"):
        RagResults.from_json(path)


def test_single_questions_write_no_turn_fields(tmp_path: Path) -> None:
    results = RagEvaluator(Asked(), Recording(), k=2, n_resamples=20).evaluate(PLAIN)
    data = json.loads(results.json_text())
    assert "attribution_by_turn_index" not in data
    assert not {"conversation_id", "turn_index"} & set(data["per_question"]["q1"])
    assert all("p_value" not in d for d in data["differences"])
    assert "conversation" not in data["config"]


def test_the_terminal_names_the_conversations_and_the_clustered_tests(turns: TurnQuestions) -> None:
    import io

    from evret_core.report.rag_tables import print_rag

    results = RagEvaluator(Asked(), Recording(), k=2, n_resamples=20).evaluate(turns)
    out = io.StringIO()
    print_rag(results, file=out)
    text = out.getvalue()
    assert "attribution by turn index" in text
    assert "differences between conditions (conversation-clustered bootstrap, 95% CI)" in text
    assert "the questions are 4 turns of 2 conversations (query form last_turn, reference history, claims " \
           "history all)" in text
    p = next(d.p_value for d in results.differences if d.metric == "exact")
    assert p is not None and re.search(rf"retrieved - gold exact p={p:.4f}", text)


def test_a_query_form_on_single_questions_is_refused() -> None:
    with pytest.raises(EvretError, match="applies to the turns of a conversation dataset"):
        RagEvaluator(Asked(), Recording(), query_form="full_history").evaluate(PLAIN)
    with pytest.raises(EvretError, match="unknown query form 'last_tun' \\(did you mean last_turn\\?\\)"):
        RagEvaluator(Asked(), Recording(), query_form="last_tun")
    with pytest.raises(EvretError, match="unknown claims history 'some'"):
        RagEvaluator(Asked(), Recording(), claims_history="some")


def test_the_rewrite_form_without_rewrites_is_refused_before_any_work(tmp_path: Path) -> None:
    plain = [{**c, "turns": [{k: v for k, v in t.items() if k != "rewrite"} for t in c["turns"]]}  # type: ignore[attr-defined]
             for c in CONVERSATIONS]
    path = write_conversations(tmp_path, plain)
    questions = turn_questions(ConversationSet.from_jsonl(path, tmp_path / "corpus.jsonl"))
    retriever, generator = Asked(), Recording()
    with pytest.raises(EvretError, match="--query-form rewrite: none of the 4 turns has a 'rewrite'"):
        RagEvaluator(retriever, generator, query_form="rewrite").evaluate(questions)
    assert retriever.queries == [] and generator.requests == []


def _evret(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-W", "error", "-m", "evret_core.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize(("args", "message"), [
    (["--query-form", "full_history"], "--query-form (setting 'query_form') applies to conversation datasets"),
    (["--claims-history", "user"], "--claims-history (setting 'claims_history') applies to conversation datasets"),
    (["--rewriter", "carry-terms"], "--rewriter (setting 'rewriter') applies to conversation datasets"),
    (["--history", "generated"], "--history (setting 'history') applies to conversation datasets"),
])
def test_conversation_flags_on_a_question_set_are_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                                                      message: str) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "x?", "answers": ["y"]}) + "\n")
    done = _evret("rag", "--dataset", str(questions), "--generator", "extractive", "--conditions", "gold", *args,
                  cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip() == f"evret: error: {message} (--dataset-format conversations " \
        "or mtrag, or a .jsonl of conversations with 'turns')"


@pytest.mark.parametrize(("args", "message"), [
    (["--query-form", "rewriter"], "evret: error: --query-form rewriter needs --rewriter NAME"),
    (["--rewriter", "carry-terms"], "evret: error: --rewriter carry-terms: the rewriter makes the queries of --query-form "
                                    "rewriter; give it (the query form is last_turn)"),
])
def test_a_rewriter_and_its_form_go_together(tmp_path: Path, args: list[str], message: str) -> None:
    path = write_conversations(tmp_path)
    done = _evret("rag", "--dataset", str(path), "--corpus", str(tmp_path / "corpus.jsonl"), "--generator",
                  "extractive", "--retriever", "bm25", *args, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().startswith(message), done.stderr


def test_a_config_file_names_the_option_with_a_did_you_mean(tmp_path: Path) -> None:
    from evret_core.rag.rag_config import RagConfig

    config = tmp_path / "rag.toml"
    config.write_text('dataset = "c.jsonl"\ngenerator = "extractive"\nquery_form = "ful_history"\n')
    with pytest.raises(EvretError, match=r"rag.toml: option 'query_form': unknown value 'ful_history' \(did you "
                                         r"mean full_history\?\); use last_turn, full_history, rewrite, rewriter"):
        RagConfig.from_toml(config)


def test_evret_rag_reads_a_conversation_jsonl_by_its_records(tmp_path: Path) -> None:
    path = write_conversations(tmp_path)
    done = _evret("rag", "--dataset", str(path), "--corpus", str(tmp_path / "corpus.jsonl"), "--generator",
                  "extractive", "--retriever", "bm25", "--query-form", "full_history", "--history-roles", "all",
                  "--claims-history", "user", "--resamples", "50", "--output", "out.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("conversations.jsonl: 4 turns of 2 conversations\n")
    results = RagResults.from_json(tmp_path / "out.json")
    assert results.config["conversation"]["query_form"] == "full_history"
    assert results.config["conversation"]["history_window"]["roles"] == "all"
    assert results.config["conversation"]["claims_history"] == "user"


def mtrag_un() -> Path:
    return shared_data("datasets", "mtrag", "generation_tasks", "mtrag-un-reference.jsonl", what="MTRAG-UN")


def test_evret_rag_runs_on_twenty_mtrag_un_turns(tmp_path: Path) -> None:
    lines = mtrag_un().read_text(encoding="utf-8").splitlines(keepends=True)[:20]
    subset = tmp_path / "mtrag-un-20.jsonl"
    subset.write_text("".join(lines), encoding="utf-8")
    done = _evret("rag", "--dataset", str(subset), "--dataset-format", "mtrag", "--generator", "extractive",
                  "--retriever", "bm25", "--resamples", "100", "--output", "out.json", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    results = RagResults.from_json(tmp_path / "out.json")
    assert len(results.per_question) == 20 and results.clustered
    records = [json.loads(line) for line in lines]
    for record in records:
        turn = results.per_question[record["task_id"]] if record["task_id"] in results.per_question else None
        assert turn is not None, record["task_id"]
        assert turn.conversation_id == record["conversation_id"]
        assert turn.question == record["input"][-1]["text"]
        assert turn.turn_index == (len(record["input"]) + 1) // 2
    assert sum(results.attribution.values()) == 20
    assert sum(sum(r.values()) for r in results.attribution_by_turn_index.values()) == 20
    assert "20 turns of 20 conversations" in done.stdout


def test_the_docs_command_runs_on_the_shared_copy(tmp_path: Path) -> None:
    mtrag_un()
    page = (repo_root() / "docs" / "rag.md").read_text(encoding="utf-8")
    section = page.split("\n## Conversations\n", 1)[1]
    command = re.search(r"```bash\n(evret rag .*?)```", section, flags=re.DOTALL)
    assert command, "docs/rag.md's Conversations section has no evret rag command"
    args = shlex.split(command.group(1).replace("\\\n", " "))[2:]
    args = [a.replace("../shared", str(repo_root().parent / "shared")) for a in args]
    done = _evret("rag", *args, "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "turns of" in done.stdout and "attribution by turn index" in done.stdout


def test_an_output_onto_a_file_of_the_mtrag_copy_is_refused_before_any_work(tmp_path: Path) -> None:
    source = mtrag_un().parents[1]
    copy = tmp_path / "mtrag"
    (copy / "generation_tasks").mkdir(parents=True)
    (copy / "evaluations").mkdir()
    lines = (source / "generation_tasks" / "mtrag-un-reference.jsonl").read_text(encoding="utf-8").splitlines()[:2]
    dataset = copy / "generation_tasks" / "mtrag-un-reference.jsonl"
    dataset.write_text("\n".join(lines) + "\n", encoding="utf-8")
    sibling = copy / "evaluations" / "notes.json"
    sibling.write_text("{}", encoding="utf-8")
    done = _evret("rag", "--dataset", str(dataset), "--dataset-format", "mtrag", "--generator", "extractive",
                  "--conditions", "gold", "--output", str(sibling), cwd=tmp_path)
    assert done.returncode == 2 and "--output" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert sibling.read_text(encoding="utf-8") == "{}"


class SupportedByTheConversation:
    """A claim judge that finds each claim of a turn with history supported by its first earlier message alone,
    and each claim of a first turn by its contexts."""

    name = "supported-by-the-conversation"

    def judge_claims(self, tasks: Sequence[ClaimTask]) -> list[list[ClaimVerdict]]:
        return [[ClaimVerdict(c.text, list(c.citations), "supported",
                              supporting=[f"history:0:{t.history[0].role}"] if t.history else
                              [t.contexts[0].doc_id]) for c in t.claims] for t in tasks]


@pytest.mark.parametrize(("mode", "rate"), [("all", 1.0), ("none", None)])
def test_the_history_support_rate_of_a_run_is_the_history_the_claims_were_judged_against(
        turns: TurnQuestions, mode: str, rate: float | None) -> None:
    """Two of the four labelled turns have earlier messages: under ``all`` their claims rest on the history alone
    (rate 1 each; the first turns, judged without a history, have no such score); under ``none`` no claim was judged
    against a history, so the run has no such score at all."""
    results = RagEvaluator(Asked(), Recording(), k=2, n_resamples=20, claim_judge=SupportedByTheConversation(),
                           claims_history=mode, relevance="none").evaluate(turns)
    generation = results.generation["retrieved"]
    assert generation.get("history_support_rate") == rate
    per_turn = {q: o.conditions["retrieved"].scores.get("history_support_rate")
                for q, o in results.per_question.items()}
    assert sorted(v for v in per_turn.values() if v is not None) == ([1.0, 1.0] if rate else [])
    assert generation["groundedness"] == 1.0
