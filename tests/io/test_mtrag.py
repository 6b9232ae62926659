"""The MTRAG importer on the shared MTRAG copy (../shared/datasets/mtrag): retrieval tasks with the reduced corpus,
MTRAG-UN generation tasks, the human-evaluation subset and its responses; and every error on broken copies."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.conversation.forms import HistoryWindow, history_text
from evret_core.io.conversations import ConversationSet
from evret_core.io.jsonio import loads_json
from evret_core.io.mtrag import DOMAINS, mtrag_passages, mtrag_responses, mtrag_root, read_mtrag
from evret_core.testing.shared_data import shared_data


@pytest.fixture(scope="module")
def mtrag() -> Path:
    return shared_data("datasets", "mtrag", "PROVENANCE.md", what="MTRAG").parent


@pytest.fixture(scope="module")
def retrieval(mtrag: Path) -> ConversationSet:
    return read_mtrag(mtrag / "retrieval_tasks")


def questions(mtrag: Path) -> dict[str, str]:
    out = {}
    for domain in DOMAINS:
        for line in (mtrag / "retrieval_tasks" / domain / f"{domain}_questions.jsonl").read_text().splitlines():
            record = json.loads(line)
            out[record["_id"]] = record["text"]
    return out


def test_the_retrieval_tasks_as_conversations(retrieval: ConversationSet, mtrag: Path) -> None:
    assert len(retrieval) == 110 and retrieval.turn_count() == 827
    # the 777 turns MTRAG labels for retrieval (history-only turns are the 50 it left out), before the corpus
    tasks = questions(mtrag)
    assert len(tasks) == 777 and {t.turn_id for c in retrieval.conversations for t in c.turns} >= tasks.keys()
    assert Counter(c.tags["domain"] for c in retrieval.conversations) == {"clapnq": 29, "cloud": 26, "fiqa": 27,
                                                                         "govt": 28}
    labelled = retrieval.labelled_turns()
    assert len(labelled) == 238 and all(t.turn_id in tasks and t.rewrite for _, t in labelled)
    assert retrieval.name == "mtrag" and mtrag_root(mtrag / "retrieval_tasks" / "govt") == mtrag.resolve()
    assert retrieval.notes == (
        "no --corpus: using the 1,488 MTRAG passages that have text (a reduced corpus; the upstream corpora hold "
        "49k-183k passages each); 539 of 777 labelled turns have no judged passage in it and are kept as history only; "
        "121 judged pairs of the kept turns have no text and were dropped",
        "the retrieval tasks hold no agent replies: full_history holds user turns only, as MTRAG's own 'questions' "
        "form",
        "589 of 827 turns carry no labels: kept as history, not scored")
    first = next(t for _, t in labelled if t.turn_id == "5b2404d71f9ff7edabddb3b1a8b329e7<::>1")
    assert first.user == '"What are the sheltered rooms designated for use?'
    assert set(first.relevance) <= set(retrieval.corpus or {}) and set(first.relevance.values()) == {1.0}


def test_full_history_reproduces_the_questions_form(retrieval: ConversationSet, mtrag: Path) -> None:
    """forms.py's full_history (HistoryWindow defaults) against MTRAG's own ``questions`` text: equal for all 777
    once each earlier message's whitespace runs are collapsed as forms.py collapses them (598 of the 777 are
    byte-identical; the others differ only by repeated or trailing spaces inside earlier messages)."""
    turns = {t.turn_id: (c, t) for c in retrieval.conversations for t in c.turns}
    exact = 0
    for task_id, text in questions(mtrag).items():
        conversation, turn = turns[task_id]
        parts = text.removeprefix("|user|:").split("\n|user|: ")
        got = history_text(conversation, turn, HistoryWindow())
        assert got == "\n".join([" ".join(p.split()) for p in parts[:-1]] + [parts[-1].strip()]), task_id
        exact += got == text.removeprefix("|user|: ").replace("\n|user|: ", "\n")
    assert exact == 598


def test_the_reduced_corpus_per_domain(mtrag: Path) -> None:
    passages = mtrag_passages(mtrag)
    assert {d: len(passages[d]) for d in DOMAINS} == {"clapnq": 379, "cloud": 349, "fiqa": 263, "govt": 497}
    kept = {d: len(read_mtrag(mtrag / "retrieval_tasks" / d).labelled_turns()) for d in DOMAINS}
    assert kept == {"clapnq": 56, "cloud": 55, "fiqa": 53, "govt": 74}
    govt = read_mtrag(mtrag / "retrieval_tasks" / "govt")
    assert govt.name == "mtrag-govt" and len(govt.corpus or {}) == 497
    assert govt.notes[0].startswith("no --corpus: using the 497 MTRAG passages of govt that have text")
    assert all("domain" not in t.tags for c in govt.conversations for t in c.turns)


def test_the_evaluation_subset_gives_replies_and_tags_to_its_conversations(retrieval: ConversationSet) -> None:
    tagged = [t for c in retrieval.conversations for t in c.turns if "answerability" in t.tags]
    assert sum(t.is_labelled for t in tagged) == 150  # every rated retrieval task is a kept turn
    with_replies = [c for c in retrieval.conversations if any(t.agent for t in c.turns)]
    assert len(with_replies) == 20


def test_a_load_parses_the_evaluation_file_once(mtrag: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the reduced corpus and the agent replies both come from it; each parse re-encodes it whole (0.07 s)
    import evret_core.io.mtrag as module

    parsed: list[str] = []

    def counting(text: str, source: str | Path, line: int | None = None) -> Any:
        parsed.append(Path(source).name)
        return loads_json(text, source, line)

    monkeypatch.setattr(module, "loads_json", counting)
    dataset = read_mtrag(mtrag / "retrieval_tasks")
    assert parsed.count("reference_subset_with_human_evaluations.json") == 1
    assert len(dataset.corpus or {}) == 1488 and sum(any(t.agent for t in c.turns) for c in dataset.conversations) == 20
    parsed.clear()
    read_mtrag(mtrag / "retrieval_tasks" / "govt", corpus={"x": {"title": "", "text": "x"}} | dict(dataset.corpus or {}))
    assert parsed.count("reference_subset_with_human_evaluations.json") == 1


def test_a_given_corpus_maps_ids_without_chunk_offsets(mtrag: Path, tmp_path: Path) -> None:
    ids = {line.split("\t")[1] for line in
           (mtrag / "retrieval_tasks" / "govt" / "qrels" / "dev.tsv").read_text().splitlines()[1:]}
    corpus = {i.rsplit("-", 2)[0]: {"title": "", "text": "x"} for i in ids}
    dataset = read_mtrag(mtrag / "retrieval_tasks" / "govt", corpus=corpus)
    assert len(dataset.labelled_turns()) == 201 and dataset.corpus == corpus
    assert "521 qrels ids mapped to corpus ids by dropping their chunk offsets" in dataset.notes


def test_mtrag_un_generation_tasks(mtrag: Path) -> None:
    dataset = read_mtrag(mtrag / "generation_tasks" / "mtrag-un-reference.jsonl")
    assert len(dataset) == 507 and len(dataset.corpus or {}) == 1152
    tasks = [t for c in dataset.conversations for t in c.turns if "answerability" in t.tags]
    assert len(tasks) == 507 and all(t.turn_id == f"{c.conversation_id}<::>{t.index}" for c in dataset.conversations
                                     for t in c.turns)
    assert Counter(t.expected_behaviour for t in tasks) == {"answer": 332, "refuse": 97, "clarify": 78}
    assert Counter(t.tags["multi_turn"] for t in tasks) == {"follow-up": 330, "n/a": 103, "clarification": 74}
    assert Counter(t.tags["domain"] for t in tasks) == {"govt": 157, "clapnq": 142, "cloud": 131, "fiqa": 77}
    assert all(t.index == len(c.turns) for c in dataset.conversations for t in c.turns if t in tasks)
    assert all(bool(t.expected_answers) == (t.expected_behaviour == "answer") and t.metadata["reference_answer"]
               for t in tasks)
    assert all(t.relevant_doc_ids is None for t in tasks if t.tags["answerability"] == "unanswerable")
    first = dataset.conversations[0]
    assert first.turns[-1].tags == {"domain": "fiqa", "answerability": "answerable",
                                    "question_type": "opinion+summarization", "multi_turn": "clarification",
                                    "turn": "7"}
    assert first.turns[0].metadata["author_type"] in ("human", "model") and first.turns[0].agent


def test_the_human_evaluation_subset_and_its_responses(mtrag: Path) -> None:
    path = mtrag / "evaluations" / "reference_subset_with_human_evaluations.json"
    dataset = read_mtrag(path)
    assert len(dataset) == 20 and dataset.turn_count() == 159 and len(dataset.corpus or {}) == 350
    tasks = [t for c in dataset.conversations for t in c.turns if "answerability" in t.tags]
    assert len(tasks) == 159 and Counter(t.expected_behaviour for t in tasks) == {"answer": 152, "refuse": 7}
    assert all(t.agent for c in dataset.conversations for t in c.turns[:-1])
    responses = mtrag_responses(path)
    assert {k: len(v) for k, v in responses.items()} == {"reference": 159, "llama-3.1-405b-instruct": 159,
                                                          "gpt-4o": 159}
    ratings = Counter(len(r["metadata"]["human"]["faithfulness"]) for v in responses.values() for r in v)
    assert ratings == {3: 465, 2: 12}
    record = responses["reference"][0]
    assert record["question_id"] == "f0d2873b877409f61da7dbdddd22d279<::>1" and record["text"].startswith("Yes, you")
    assert set(record["metadata"]["human"]) == {"faithfulness", "appropriateness", "naturalness", "completeness"}
    assert {"RougeL", "Bert-KPrec", "rl_f", "rb_llm"} <= set(record["metadata"]["authors"])


# -- broken copies ---------------------------------------------------------------------------------------------------


@pytest.fixture
def govt(mtrag: Path, tmp_path: Path) -> Path:
    """A copy of the govt folder alone (no MTRAG copy around it: the corpus must be given)."""
    return Path(shutil.copytree(mtrag / "retrieval_tasks" / "govt", tmp_path / "govt"))


CORPUS = {"c8db6e06ff46669e-50302-52227": {"title": "", "text": "a passage"}}


def edit(path: Path, line: int, change: object) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[line - 1] = change(lines[line - 1]) if callable(change) else str(change)
    path.write_text("\n".join(lines), encoding="utf-8")


def raises(message: str) -> Any:
    return pytest.raises(EvretError, match="^" + re.escape(message) + "$")


def test_the_shared_copy_reads_with_a_corpus_alone(govt: Path) -> None:
    assert len(read_mtrag(govt, corpus=CORPUS).labelled_turns()) == 1
    with raises(f"{govt}: MTRAG retrieval tasks need the passage corpus: give --corpus CORPUS.jsonl (the upstream "
                "corpora/<domain>.jsonl) or keep the MTRAG folder whole (generation_tasks/ and evaluations/ give "
                "1,488 passages)"):
        read_mtrag(govt)
    with raises(f"{govt}: no conversation has a labelled turn (no judged passage is in the corpus)"):
        read_mtrag(govt, corpus={"other": {"title": "", "text": "x"}})


def test_a_text_without_the_user_marker(govt: Path) -> None:
    edit(govt / "govt_lastturn.jsonl", 3, lambda line: line.replace("|user|: ", "", 1))
    with raises(f"{govt}/govt_lastturn.jsonl:3: field 'text' must start with '|user|:'"):
        read_mtrag(govt, corpus=CORPUS)


def test_a_turn_missing_from_another_form(govt: Path) -> None:
    first = json.loads((govt / "govt_rewrite.jsonl").read_text().split("\n")[1])["_id"]
    edit(govt / "govt_rewrite.jsonl", 2, "")
    with raises(f"{govt}/govt_lastturn.jsonl:2: turn {first!r} is in govt_lastturn.jsonl but not in "
                "govt_rewrite.jsonl"):
        read_mtrag(govt, corpus=CORPUS)


def test_a_history_with_the_wrong_number_of_turns(govt: Path) -> None:
    record = json.loads((govt / "govt_questions.jsonl").read_text().split("\n")[2])
    record["text"] = record["text"].split("\n|user|: ", 1)[1]
    record["text"] = "|user|: " + record["text"]
    edit(govt / "govt_questions.jsonl", 3, json.dumps(record))
    with raises(f"{govt}/govt_questions.jsonl:3: the history of {record['_id']!r} has 2 user turns, its id says "
                "turn 3"):
        read_mtrag(govt, corpus=CORPUS)


def test_a_history_whose_turn_differs_from_the_last_turn(govt: Path) -> None:
    edit(govt / "govt_lastturn.jsonl", 2, lambda line: line.replace('keep?"', 'keep ready?"'))
    with raises(f"{govt}/govt_questions.jsonl:2: the history's turn 2 differs from govt_lastturn.jsonl:2"):
        read_mtrag(govt, corpus=CORPUS)


def test_a_bad_task_id(govt: Path) -> None:
    edit(govt / "govt_lastturn.jsonl", 1, lambda line: line.replace("<::>1", "#1", 1))
    with raises(f"{govt}/govt_lastturn.jsonl:1: field '_id' must be '<conversation><::><turn>', got "
                "'5b2404d71f9ff7edabddb3b1a8b329e7#1'"):
        read_mtrag(govt, corpus=CORPUS)


def test_qrels_errors(govt: Path) -> None:
    qrels = govt / "qrels" / "dev.tsv"
    original = qrels.read_text()
    edit(qrels, 2, lambda line: line.rsplit("\t", 1)[0] + "\tyes")
    with raises(f"{qrels}:2: score 'yes' is not a number"):
        read_mtrag(govt, corpus=CORPUS)
    qrels.write_text(original + "nowhere<::>1\td1\t1\n")
    with raises(f"{qrels}:{len(original.splitlines()) + 1}: query 'nowhere<::>1' is in no task file"):
        read_mtrag(govt, corpus=CORPUS)


def test_files_that_are_not_mtrag(tmp_path: Path, mtrag: Path) -> None:
    other = tmp_path / "x.jsonl"
    other.write_text('{"query": "q"}\n')
    with pytest.raises(EvretError, match=r"x.jsonl: not MTRAG data: a retrieval_tasks folder"):
        read_mtrag(other)
    with pytest.raises(EvretError, match=r": not MTRAG data"):
        read_mtrag(tmp_path)


def generation_copy(mtrag: Path, tmp_path: Path, lines: int = 3) -> tuple[Path, list[dict[str, object]]]:
    records = [json.loads(line) for line in
               (mtrag / "generation_tasks" / "mtrag-un-reference.jsonl").read_text().splitlines()[:lines]]
    return tmp_path / "un.jsonl", records


def write_records(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_broken_generation_tasks(mtrag: Path, tmp_path: Path) -> None:
    path, records = generation_copy(mtrag, tmp_path)
    assert len(read_mtrag(write_records(path, records))) == 3
    with raises(f"{path}:3: duplicate conversation_id {records[0]['conversation_id']!r} (first at {path}:1)"):
        read_mtrag(write_records(path, [*records[:2], {**records[2], "conversation_id": records[0]["conversation_id"]}]))
    with raises(f"{path}:2: field 'answerability' must hold one of ANSWERABLE, PARTIAL, CONVERSATIONAL, "
                "UNANSWERABLE, UNDERSPECIFIED, got ['MAYBE']"):
        read_mtrag(write_records(path, [records[0], {**records[1], "answerability": ["MAYBE"]}]))
    messages = list(records[0]["input"])  # type: ignore[call-overload]
    with raises(f"{path}:1: field 'input' must be a list of user and agent messages ending with the user's"):
        read_mtrag(write_records(path, [{**records[0], "input": messages[:-1]}]))
    swapped = [messages[1], messages[0], *messages[2:]]
    with raises(f"{path}:1: input[0]: expected a user message ({{speaker, text}})"):
        read_mtrag(write_records(path, [{**records[0], "input": swapped}]))


def test_a_broken_evaluation_file(mtrag: Path, tmp_path: Path) -> None:
    data = json.loads((mtrag / "evaluations" / "reference_subset_with_human_evaluations.json").read_text())
    index = next(i for i, t in enumerate(data["tasks"]) if len(t["input"]) == 3)
    data["tasks"][index]["input"][0]["text"] = "something else"
    path = tmp_path / "evaluations.json"
    path.write_text(json.dumps(data))
    with pytest.raises(EvretError, match=re.escape(f"{path}: tasks[") + r"\d+\]: its input is not the start of its "
                                         r"conversation's longest input"):
        read_mtrag(path)
    data["evaluations"][0]["annotations"]["faithfulness"] = {"r1": {"value": "high"}}
    path.write_text(json.dumps(data))
    with raises(f"{path}: evaluations[0]: annotations.faithfulness: a rating is not a number 1-4"):
        mtrag_responses(path)


def test_the_docs_example_prints_what_the_page_shows(mtrag: Path) -> None:
    import subprocess
    import sys

    from evret_core.testing.shared_data import repo_root

    page = (repo_root() / "docs" / "conversations.md").read_text(encoding="utf-8")
    example = page.split("## Example on the shared MTRAG copy", 1)[1]
    code = re.search(r"```python\n(.*?)```", example, flags=re.DOTALL)
    shown = re.search(r"```text\n(.*?)```", example, flags=re.DOTALL)
    assert code and shown
    source = code.group(1).replace("../shared/datasets/mtrag", str(mtrag))
    proc = subprocess.run([sys.executable, "-W", "error", "-c", source], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == shown.group(1)


def test_the_reduced_corpus_figures_the_docs_state(retrieval: ConversationSet, mtrag: Path) -> None:
    judged = {line.split("\t")[1] for d in DOMAINS for line in
              (mtrag / "retrieval_tasks" / d / "qrels" / "dev.tsv").read_text().splitlines()[1:]}
    assert len(judged) == 1800 and len(judged & set(retrieval.corpus or {})) == 435
    assert len({c.conversation_id for c, _ in retrieval.labelled_turns()}) == 59
