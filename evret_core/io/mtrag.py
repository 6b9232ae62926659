"""The MTRAG importer (``dataset_format="mtrag"``): IBM's MTRAG retrieval tasks, MTRAG-UN generation tasks and the
human-evaluation subset as a :class:`~evret_core.io.conversations.ConversationSet`, and the rated responses as
answers-file records (:func:`mtrag_responses`).

What :func:`read_mtrag` reads is told by ``path``: a ``retrieval_tasks/<domain>`` folder or the ``retrieval_tasks``
folder of the four, the MTRAG-UN ``.jsonl`` (records with ``input``, ``targets`` and ``answerability``), or the
evaluation ``.json`` (an object with ``tasks`` and ``evaluations``). The passage corpora of MTRAG (49k-183k passages
a domain) are not part of a copy; without ``corpus``, a path inside a whole MTRAG copy uses the passages the copy
has text for (:func:`mtrag_passages`: a reduced corpus), and says so in a note. docs/conversations.md documents
the mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.io.conversations import Conversation, ConversationSet, ConversationTurn
from evret_core.io.corpus import read_corpus
from evret_core.io.dataset_files import read_beir_qrels
from evret_core.io.jsonio import iter_json_lines, loads_json, read_text

__all__ = ["DOMAINS", "mtrag_files", "mtrag_passages", "mtrag_responses", "mtrag_root", "read_mtrag"]

DOMAINS: tuple[str, ...] = ("clapnq", "cloud", "fiqa", "govt")
"""MTRAG's four corpora, as its retrieval task folders name them."""

_MARK = "|user|:"
_SEP = "\n|user|: "
_BEHAVIOUR = {"answerable": "answer", "partial": "answer", "conversational": "answer", "unanswerable": "refuse",
              "underspecified": "clarify"}
_HUMAN = ("faithfulness", "appropriateness", "naturalness", "completeness")
_UN_FILE = Path("generation_tasks") / "mtrag-un-reference.jsonl"
_EVAL_FILE = Path("evaluations") / "reference_subset_with_human_evaluations.json"

Corpus = Mapping[str, Mapping[str, Any]]


def read_mtrag(path: str | Path, corpus: str | Path | Corpus | None = None) -> ConversationSet:
    """MTRAG data as conversations (see the module): retrieval tasks with their qrels, MTRAG-UN generation tasks,
    or the human-evaluation subset. ``corpus``: a JSONL corpus file or a mapping id -> ``{"title", "text"}``."""
    path = Path(path)
    given = corpus if corpus is None or isinstance(corpus, Mapping) else read_corpus(corpus)
    if path.is_dir():
        if (path / "qrels" / "dev.tsv").is_file():
            return _read_retrieval([path], given, path)
        domains = sorted(p for p in path.iterdir() if (p / "qrels" / "dev.tsv").is_file())
        if domains:
            return _read_retrieval(domains, given, path)
        raise EvretError(f"{path}: not MTRAG data: a retrieval_tasks folder (or one domain folder with qrels/dev.tsv), "
                         "mtrag-un-reference.jsonl or reference_subset_with_human_evaluations.json")
    first = _first_record(path)
    if isinstance(first, Mapping) and {"input", "targets", "answerability"} <= first.keys():
        return _read_generation(path, given)
    if path.suffix.lower() == ".json":
        data = loads_json(read_text(path, what="MTRAG file"), path)
        if isinstance(data, Mapping) and {"tasks", "evaluations"} <= data.keys():
            return _read_evaluations(path, data, given)
    raise EvretError(f"{path}: not MTRAG data: a retrieval_tasks folder (or one domain folder with qrels/dev.tsv), "
                     "mtrag-un-reference.jsonl (records with input, targets, answerability) or "
                     "reference_subset_with_human_evaluations.json (an object with tasks and evaluations)")


def mtrag_root(path: str | Path) -> Path | None:
    """The MTRAG copy ``path`` lies in: the nearest folder (``path`` itself or a parent) holding
    ``generation_tasks/`` and ``evaluations/``; None outside one."""
    path = Path(path).resolve()
    for folder in (path, *path.parents):
        if (folder / "generation_tasks").is_dir() and (folder / "evaluations").is_dir():
            return folder
    return None


def mtrag_files(path: str | Path) -> list[str]:
    """Every file of the MTRAG copy ``path`` lies in (:func:`mtrag_root`), sorted; none outside one. A run over
    MTRAG data reads them all (the reduced corpus comes from the copy's sibling folders), so none is an output."""
    root = mtrag_root(path)
    return [] if root is None else [str(p) for p in sorted(root.rglob("*")) if p.is_file()]


def mtrag_passages(root: str | Path) -> dict[str, dict[str, dict[str, str]]]:
    """The passages an MTRAG copy has text for (the MTRAG-UN contexts and the evaluation documents), by domain:
    domain -> id -> ``{"title", "text"}``. A passage's domain is that of the qrels file judging it, else the
    ``Collection`` of a task citing it (``ibmcloud`` is ``cloud``)."""
    return _passages(Path(root), _evaluation_file(Path(root)))


def _evaluation_file(root: Path) -> Any:
    """The parsed evaluation file of the MTRAG copy at ``root``; a load reads it once (it holds ``\\u`` surrogate
    escapes, so parsing it also re-encodes it whole: :func:`~evret_core.io.jsonio.loads_json`)."""
    return loads_json(read_text(root / _EVAL_FILE, what="MTRAG evaluation file"), root / _EVAL_FILE)


def _passages(root: Path, data: Any) -> dict[str, dict[str, dict[str, str]]]:
    """:func:`mtrag_passages` with the evaluation file's ``data`` already read."""
    judged: dict[str, str] = {}
    for domain in DOMAINS:
        qrels = root / "retrieval_tasks" / domain / "qrels" / "dev.tsv"
        if qrels.is_file():
            for docs in read_beir_qrels(qrels).values():
                for doc_id in docs:
                    judged.setdefault(doc_id, domain)
    texts: dict[str, dict[str, str]] = {}
    cited: dict[str, str] = {}
    for _lineno, _where, record in iter_json_lines(root / _UN_FILE, what="MTRAG-UN file"):
        for context in record.get("contexts") or []:
            texts.setdefault(str(context["document_id"]), _passage(context))
            cited.setdefault(str(context["document_id"]), _domain(str(record.get("Collection", ""))))
    for document in data.get("documents") or []:
        texts.setdefault(str(document["document_id"]), _passage(document))
    for task in data.get("tasks") or []:
        for context in task.get("contexts") or []:
            cited.setdefault(str(context["document_id"]), _domain(str(task.get("Collection", ""))))
    out: dict[str, dict[str, dict[str, str]]] = {domain: {} for domain in DOMAINS}
    for doc_id, passage in texts.items():
        domain = judged.get(doc_id) or cited.get(doc_id, "")
        out.setdefault(domain, {})[doc_id] = passage
    return out


def mtrag_responses(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """The rated responses of the human-evaluation file, per ``model_id``, as answers-file records:
    ``{"question_id": task id, "text": response, "metadata": {"human": {metric: [ratings 1-4, one per rater]},
    "authors": {metric: value}}}`` (the human metrics faithfulness, appropriateness, naturalness, completeness;
    the authors' automatic metrics as the file gives them)."""
    path = Path(path)
    data = loads_json(read_text(path, what="MTRAG evaluation file"), path)
    if not isinstance(data, Mapping) or not isinstance(data.get("evaluations"), list):
        raise EvretError(f"{path}: not the MTRAG human-evaluation file (no 'evaluations' list)")
    out: dict[str, list[dict[str, Any]]] = {}
    for i, evaluation in enumerate(data["evaluations"]):
        where = f"{path}: evaluations[{i}]"
        if not isinstance(evaluation, Mapping) or not all(
                isinstance(evaluation.get(k), str) for k in ("task_id", "model_id", "model_response")):
            raise EvretError(f"{where}: needs 'task_id', 'model_id' and 'model_response' strings")
        annotations = evaluation.get("annotations") or {}
        human: dict[str, list[int]] = {}
        authors: dict[str, Any] = {}
        for metric, raters in annotations.items():
            if metric in _HUMAN:
                try:
                    human[metric] = [int(r["value"]) for r in raters.values()]
                except (KeyError, TypeError, ValueError):
                    raise EvretError(f"{where}: annotations.{metric}: a rating is not a number 1-4") from None
            elif isinstance(raters, Mapping) and len(raters) == 1 and next(iter(raters)) in ("system", "composite"):
                authors[metric] = next(iter(raters.values())).get("value")
        out.setdefault(evaluation["model_id"], []).append({
            "question_id": evaluation["task_id"], "text": evaluation["model_response"],
            "metadata": {"human": human, "authors": authors}})
    return out


# -- retrieval tasks -----------------------------------------------------------------------------------------------


def _read_retrieval(folders: list[Path], given: Corpus | None, path: Path) -> ConversationSet:
    root = mtrag_root(path)
    notes: list[str] = []
    evaluation = None  # read once: the reduced corpus and the agent replies both come from it
    if root is not None and (given is None or (root / _EVAL_FILE).is_file()):
        evaluation = _evaluation_file(root)
    if given is None:
        if root is None:
            raise EvretError(f"{path}: MTRAG retrieval tasks need the passage corpus: give --corpus CORPUS.jsonl "
                             "(the upstream corpora/<domain>.jsonl) or keep the MTRAG folder whole "
                             "(generation_tasks/ and evaluations/ give 1,488 passages)")
        passages = _passages(root, evaluation)
        corpus: dict[str, Mapping[str, Any]] = {}
        for folder in folders:
            corpus.update(passages.get(folder.name, {}))
    else:
        corpus = dict(given)
    conversations: list[Conversation] = []
    for folder in folders:
        conversations.extend(_domain_conversations(folder, len(folders) > 1))
    if root is not None and evaluation is not None:
        conversations = _with_evaluation_replies(conversations, evaluation, root / _EVAL_FILE)
    conversations, labelled, dropped_turns, dropped_pairs, mapped = _judged_in(conversations, corpus)
    if given is None:
        which = "" if len(folders) == len(DOMAINS) else f" of {', '.join(f.name for f in folders)}"
        notes.append(f"no --corpus: using the {len(corpus):,} MTRAG passages{which} that have text (a reduced corpus; "
                     f"the upstream corpora hold 49k-183k passages each); {dropped_turns} of {labelled} labelled turns "
                     f"have no judged passage in it and are kept as history only; {dropped_pairs} judged pairs of the "
                     "kept turns have no text and were dropped")
    elif dropped_turns or dropped_pairs:
        notes.append(f"{dropped_turns} of {labelled} labelled turns have no judged passage in the corpus and are kept "
                     f"as history only; {dropped_pairs} judged pairs of the kept turns are not in it and were dropped")
    if mapped:
        notes.append(f"{mapped} qrels ids mapped to corpus ids by dropping their chunk offsets")
    notes.append("the retrieval tasks hold no agent replies: full_history holds user turns only, as MTRAG's own "
                 "'questions' form")
    total = sum(len(c.turns) for c in conversations)
    history = sum(not t.is_labelled for c in conversations for t in c.turns)
    notes.append(f"{history} of {total} turns carry no labels: kept as history, not scored")
    if not any(t.is_labelled for c in conversations for t in c.turns):
        raise EvretError(f"{path}: no conversation has a labelled turn (no judged passage is in the corpus)")
    name = "mtrag" if len(folders) > 1 else f"mtrag-{folders[0].name}"
    return ConversationSet(tuple(conversations), corpus, name, tuple(notes))


def _split_id(task_id: Any, where: str) -> tuple[str, int]:
    conversation, sep, turn = str(task_id).rpartition("<::>")
    if not sep or not conversation or not turn.isdigit() or int(turn) < 1:
        raise EvretError(f"{where}: field '_id' must be '<conversation><::><turn>', got {str(task_id)[:60]!r}")
    return conversation, int(turn)


def _task_file(path: Path) -> dict[str, tuple[int, str]]:
    """``_id`` -> (line, text without the leading ``|user|:`` marker) of one task file."""
    out: dict[str, tuple[int, str]] = {}
    for lineno, where, record in iter_json_lines(path, what="MTRAG task file"):
        if not isinstance(record, Mapping) or "_id" not in record:
            raise EvretError(f"{where}: expected a JSON object with an '_id' field")
        text = record.get("text")
        if not isinstance(text, str) or not text.startswith(_MARK):
            raise EvretError(f"{where}: field 'text' must start with '{_MARK}'")
        _split_id(record["_id"], where)
        task_id = str(record["_id"])
        if task_id in out:
            raise EvretError(f"{where}: duplicate _id {task_id!r} (first on line {out[task_id][0]})")
        out[task_id] = (lineno, text[len(_MARK):])
    return out


def _domain_conversations(folder: Path, tag_domain: bool) -> list[Conversation]:
    domain = folder.name
    files = {form: folder / f"{domain}_{form}.jsonl" for form in ("lastturn", "rewrite", "questions")}
    tasks = {form: _task_file(p) for form, p in files.items()}
    for form, other in (("lastturn", "rewrite"), ("lastturn", "questions"), ("rewrite", "lastturn"),
                        ("questions", "lastturn")):
        for task_id, (lineno, _) in tasks[form].items():
            if task_id not in tasks[other]:
                raise EvretError(f"{files[form]}:{lineno}: turn {task_id!r} is in {files[form].name} but not in "
                                 f"{files[other].name}")
    qrels_path = folder / "qrels" / "dev.tsv"
    judgments = read_beir_qrels(qrels_path)
    for query_id in judgments:
        if query_id not in tasks["lastturn"]:
            raise EvretError(f"{qrels_path}:{_line_of(qrels_path, query_id)}: query {query_id!r} is in no task file")
    # each conversation's user turns: its longest history, checked against every task's own history and last turn
    longest: dict[str, tuple[int, list[str]]] = {}
    order: list[str] = []
    for task_id, (lineno, text) in tasks["questions"].items():
        where = f"{files['questions']}:{lineno}"
        conversation, n = _split_id(task_id, where)
        parts = text.lstrip(" ").split(_SEP)
        if len(parts) != n:
            raise EvretError(f"{where}: the history of {task_id!r} has {len(parts)} user turns, its id says turn {n}")
        last_line, last = tasks["lastturn"][task_id]
        if parts[-1].strip() != last.strip():
            raise EvretError(f"{where}: the history's turn {n} differs from {files['lastturn'].name}:{last_line}")
        if conversation not in longest:
            order.append(conversation)
        if conversation not in longest or n > len(longest[conversation][1]):
            longest[conversation] = (lineno, parts)
    for task_id, (lineno, last) in tasks["lastturn"].items():
        conversation, n = _split_id(task_id, f"{files['lastturn']}:{lineno}")
        line, parts = longest[conversation]
        if parts[n - 1].strip() != last.strip():
            raise EvretError(f"{files['questions']}:{line}: the history's turn {n} differs from "
                             f"{files['lastturn'].name}:{lineno}")
    conversations = []
    for conversation in order:
        turns = []
        for n, part in enumerate(longest[conversation][1], start=1):
            task_id = f"{conversation}<::>{n}"
            labelled = task_id in tasks["lastturn"]
            rewrite = tasks["rewrite"][task_id][1].strip() if labelled else None
            judged = judgments.get(task_id) if labelled else None
            turns.append(ConversationTurn(task_id, n, part.strip(), rewrite=rewrite or None,
                                          relevant_doc_ids=dict(judged) if judged else None,
                                          tags={"domain": domain} if tag_domain else {}))
        conversations.append(Conversation(conversation, tuple(turns), {"domain": domain} if tag_domain else {}))
    return conversations


def _line_of(path: Path, query_id: str) -> int:
    for lineno, line in enumerate(read_text(path).split("\n"), start=1):
        if line.split("\t", 1)[0] == query_id:
            return lineno
    return 1


def _judged_in(conversations: list[Conversation], corpus: Mapping[str, Any]
               ) -> tuple[list[Conversation], int, int, int, int]:
    """The conversations with each turn's qrels limited to the corpus (an id found there without its two chunk
    offset fields is mapped); a labelled turn left with none is history only. Returns them with the counts of
    labelled turns, turns dropped, judged pairs dropped from kept turns and ids mapped."""
    labelled = dropped_turns = dropped_pairs = mapped = 0
    out = []
    for conversation in conversations:
        turns = []
        for turn in conversation.turns:
            if turn.relevant_doc_ids is not None:
                labelled += 1
                kept: dict[str, float] = {}
                for doc_id, grade in turn.relevance.items():
                    if doc_id in corpus:
                        kept[doc_id] = grade
                    elif (short := doc_id.rsplit("-", 2)[0]) in corpus and short != doc_id:
                        kept[short], mapped = grade, mapped + 1
                if kept:
                    dropped_pairs += len(turn.relevance) - len(kept)
                else:
                    dropped_turns += 1
                turn = replace(turn, relevant_doc_ids=kept or None)
            turns.append(turn)
        out.append(replace(conversation, turns=tuple(turns)))
    return out, labelled, dropped_turns, dropped_pairs, mapped


def _with_evaluation_replies(conversations: list[Conversation], data: Any, path: Path) -> list[Conversation]:
    """The conversations of the evaluation file (``data``, read from ``path``) with its reference agent replies (its
    longest input of each) and its tasks' tags (answerability, question_type, multi_turn)."""
    inputs: dict[str, list[Any]] = {}
    tags: dict[str, dict[str, str]] = {}
    for i, task in enumerate(data.get("tasks") or []):
        conversation_id, _ = _split_id(task.get("task_id"), f"{path}: tasks[{i}]")
        messages = task.get("input") or []
        if len(messages) > len(inputs.get(conversation_id, [])):
            inputs[conversation_id] = messages
        tags[str(task["task_id"])] = _task_tags(task, "Answerability")
    out = []
    for conversation in conversations:
        messages = inputs.get(conversation.conversation_id)
        if messages is None:
            out.append(conversation)
            continue
        agents = [str(m.get("text", "")) for m in messages if m.get("speaker") == "agent"]
        turns = tuple(replace(t, agent=agents[t.index - 1] if t.index <= len(agents) else None,
                              tags={**t.tags, **tags.get(t.turn_id, {})})
                      for t in conversation.turns)
        out.append(replace(conversation, turns=turns))
    return out


# -- MTRAG-UN generation tasks and the evaluation subset -----------------------------------------------------------


def _first_record(path: Path) -> Any:
    if path.suffix.lower() != ".jsonl":
        return None
    for _lineno, _where, record in iter_json_lines(path, what="MTRAG file"):
        return record
    return None


def _domain(collection: str) -> str:
    """The domain of a task's ``Collection`` (``ibmcloud`` or ``mt-rag-ibmcloud-elser-...``: ``cloud``)."""
    for part in collection.lower().split("-"):
        if part == "ibmcloud":
            return "cloud"
        if part in DOMAINS:
            return part
    return collection.lower()


def _passage(record: Mapping[str, Any]) -> dict[str, str]:
    return {"title": str(record.get("title") or ""), "text": str(record.get("text") or "")}


def _labels(values: Any) -> list[str]:
    if isinstance(values, str):
        values = [values]
    return [str(v).strip().lower() for v in values or [] if str(v).strip()]


def _task_tags(task: Mapping[str, Any], answerability_field: str) -> dict[str, str]:
    tags = {"answerability": "+".join(_labels(task.get(answerability_field))) or "n/a",
            "question_type": "+".join(_labels(task.get("Question Type"))) or "n/a",
            "multi_turn": "+".join(_labels(task.get("Multi-Turn"))) or "n/a"}
    return tags


def _task_turns(task: Mapping[str, Any], messages: list[Any], where: str, conversation_id: str,
                answerability_field: str, tags: Mapping[str, str]) -> tuple[ConversationTurn, ...]:
    """A conversation's turns from alternating user/agent ``messages``; the turn of ``task`` (its last user message
    in ``task['input']``) labelled from the task."""
    for i, message in enumerate(messages):
        expected = "user" if i % 2 == 0 else "agent"
        if not isinstance(message, Mapping) or message.get("speaker") != expected or not isinstance(
                message.get("text"), str):
            raise EvretError(f"{where}: input[{i}]: expected a {expected} message ({{speaker, text}})")
    task_input = task["input"]
    labelled_index = (len(task_input) + 1) // 2
    turns = []
    for n in range(1, (len(messages) + 1) // 2 + 1):
        user = messages[2 * n - 2]
        agent = messages[2 * n - 1] if 2 * n - 1 < len(messages) else None
        metadata: dict[str, Any] = {}
        if agent is not None and isinstance(agent.get("metadata"), Mapping) and "author_type" in agent["metadata"]:
            metadata["author_type"] = agent["metadata"]["author_type"]
        turn = ConversationTurn(f"{conversation_id}<::>{n}", n, user["text"],
                                agent=agent["text"] if agent is not None else None, tags=dict(tags),
                                metadata=metadata)
        if n == labelled_index:
            turn = _labelled(turn, task, where, answerability_field)
        turns.append(turn)
    return tuple(turns)


def _labelled(turn: ConversationTurn, task: Mapping[str, Any], where: str,
              answerability_field: str) -> ConversationTurn:
    answerability = _labels(task.get(answerability_field))
    if len(answerability) != 1 or answerability[0] not in _BEHAVIOUR:
        raise EvretError(f"{where}: field {answerability_field!r} must hold one of "
                         f"{', '.join(k.upper() for k in _BEHAVIOUR)}, got {task.get(answerability_field)!r}")
    behaviour = _BEHAVIOUR[answerability[0]]
    targets = task.get("targets")
    if not isinstance(targets, list) or not targets or not isinstance(targets[0], Mapping) or not isinstance(
            targets[0].get("text"), str):
        raise EvretError(f"{where}: field 'targets' must hold the reference answer ({{speaker, text}})")
    reference = targets[0]["text"]
    ids = tuple(dict.fromkeys(str(c["document_id"]) for c in task.get("contexts") or []
                              if isinstance(c, Mapping) and "document_id" in c))
    return replace(turn, turn_id=str(task["task_id"]), relevant_doc_ids=ids or None,
                   expected_answers=(reference,) if behaviour == "answer" and reference.strip() else (),
                   answer_aliases=((reference,),) if behaviour == "answer" and reference.strip() else (),
                   expected_behaviour=behaviour,
                   tags={**turn.tags, **_task_tags(task, answerability_field), "turn": str(turn.index)},
                   metadata={**turn.metadata, "reference_answer": reference})


def _read_generation(path: Path, given: Corpus | None) -> ConversationSet:
    conversations: list[Conversation] = []
    seen: dict[str, str] = {}
    texts: dict[str, dict[str, str]] = {}
    for _lineno, where, record in iter_json_lines(path, what="MTRAG-UN file"):
        if not isinstance(record, Mapping):
            raise EvretError(f"{where}: expected a JSON object, got {type(record).__name__}")
        for key in ("conversation_id", "task_id"):
            if not isinstance(record.get(key), str) or not record[key]:
                raise EvretError(f"{where}: field {key!r} is missing or not a string")
        messages = record.get("input")
        if not isinstance(messages, list) or not messages or len(messages) % 2 == 0:
            raise EvretError(f"{where}: field 'input' must be a list of user and agent messages ending with the user's")
        conversation_id = record["conversation_id"]
        if conversation_id in seen:
            raise EvretError(f"{where}: duplicate conversation_id {conversation_id!r} (first at {seen[conversation_id]})")
        seen[conversation_id] = where
        tags = {"domain": _domain(str(record.get("Collection", "")))}
        turns = _task_turns(record, messages, where, conversation_id, "answerability", tags)
        conversations.append(Conversation(conversation_id, turns, tags))
        for c, context in enumerate(record.get("contexts") or []):
            if not isinstance(context, Mapping) or "document_id" not in context or not isinstance(
                    context.get("text"), str):
                raise EvretError(f"{where}: contexts[{c}]: expected {{document_id, text}}")
            texts.setdefault(str(context["document_id"]), _passage(context))
    if not conversations:
        raise EvretError(f"{path}: the file has no conversations")
    corpus = dict(given) if given is not None else texts
    return ConversationSet(tuple(conversations), corpus, path.stem, tuple(_counts(conversations)))


def _read_evaluations(path: Path, data: Mapping[str, Any], given: Corpus | None) -> ConversationSet:
    tasks = data["tasks"]
    if not isinstance(tasks, list) or not tasks:
        raise EvretError(f"{path}: field 'tasks' must be a non-empty list")
    longest: dict[str, list[Any]] = {}
    for i, task in enumerate(tasks):
        where = f"{path}: tasks[{i}]"
        if not isinstance(task, Mapping) or not isinstance(task.get("input"), list) or not task["input"]:
            raise EvretError(f"{where}: needs 'task_id' and a non-empty 'input' list")
        conversation, _ = _split_id(task.get("task_id"), where)
        if len(task["input"]) > len(longest.get(conversation, [])):
            longest[conversation] = task["input"]
    labelled: dict[str, dict[int, tuple[Mapping[str, Any], str]]] = {}
    for i, task in enumerate(tasks):
        where = f"{path}: tasks[{i}]"
        conversation, _ = _split_id(task["task_id"], where)
        if [m.get("text") for m in longest[conversation][:len(task["input"])]] != [
                m.get("text") if isinstance(m, Mapping) else None for m in task["input"]]:
            raise EvretError(f"{where}: its input is not the start of its conversation's longest input")
        index = (len(task["input"]) + 1) // 2
        if index in labelled.setdefault(conversation, {}):
            raise EvretError(f"{where}: a second task for turn {index} of {conversation!r}")
        labelled[conversation][index] = (task, where)
    conversations = []
    for conversation, messages in longest.items():
        tasks_of = labelled[conversation]
        first_task, first_where = next(iter(tasks_of.values()))
        tags = {"domain": _domain(str(first_task.get("Collection", "")))}
        turns = list(_task_turns(first_task, messages, first_where, conversation, "Answerability", tags))
        for index, (task, where) in tasks_of.items():
            turns[index - 1] = _labelled(replace(turns[index - 1], tags=dict(tags)), task, where, "Answerability")
        conversations.append(Conversation(conversation, tuple(turns), tags))
    corpus = dict(given) if given is not None else {
        str(d["document_id"]): _passage(d) for d in data.get("documents") or [] if isinstance(d, Mapping)}
    return ConversationSet(tuple(conversations), corpus, path.stem, tuple(_counts(conversations)))


def _counts(conversations: list[Conversation]) -> list[str]:
    total = sum(len(c.turns) for c in conversations)
    history = sum(not t.is_labelled and t.expected_behaviour == "answer" for c in conversations for t in c.turns)
    return [f"{history} of {total} turns carry no labels: kept as history, not scored"] if history else []
