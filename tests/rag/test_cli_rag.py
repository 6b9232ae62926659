"""`evret rag`: the bundled example end to end, --dry-run, and one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.rag import RagResults

from .conftest import EXAMPLE, squad_path


def test_example_config_runs_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "rag.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "50", "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    for section in ("retrieval (retrieved condition", "[gold]", "[retrieved]", "attribution", "retrieved - gold"):
        assert section in printed
    results = RagResults.from_json(output)
    assert results.conditions == ["gold", "retrieved"] and len(results.per_question) == 13
    refuse = [q for q in results.per_question.values() if q.expected_behaviour == "refuse"]
    assert len(refuse) == 4 and all(q.conditions["retrieved"].answer.refused for q in refuse)  # type: ignore[union-attr]
    assert results.generation["retrieved"]["correct_refusal_rate"] == 1.0
    assert results.config["generator"] == {"name": "extractive", "threshold": 0.5, "answer": "span"}
    assert results.config["k"] == 3 and results.retrieval["precision@3"] > 0


def test_command_line_options_win_over_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "rag.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--conditions", "gold", "--generator-option",
                 "threshold=0", "--resamples", "10", "--output", str(output)]) == 0
    results = RagResults.from_json(output)
    assert results.conditions == ["gold"] and results.retrieval == {} and results.attribution == {}
    assert results.generation["gold"]["refused"] == 4 / 13  # threshold 0: only the context-less refuse questions


def test_dry_run_counts_generator_calls(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rag", "--dataset", str(squad_path()), "--retriever", "bm25", "--generator", "extractive",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "706 question(s) x 2 condition(s) (gold, retrieved): 1412 generator call(s)" in out
    assert "make no LLM calls" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["rag", "--generator", "extractive"], "missing --dataset"),
    (["rag", "--dataset", "{q}", "--corpus", "{c}", "--generator", "extractive"], "needs --retriever"),
    (["rag", "--dataset", "{q}", "--corpus", "{c}", "--generator", "nope", "--conditions", "gold"],
     "unknown generator 'nope'"),
    (["rag", "--dataset", "{bad}", "--generator", "extractive", "--conditions", "gold"], "bad.jsonl:2: "),
    (["rag", "--dataset", "{q}", "--corpus", "{c}", "--generator", "extractive", "--conditions", "gold,noisy"],
     "unknown condition 'noisy'"),
    (["rag", "--config", "{toml}"], "rag.toml: option 'k': has the wrong type"),
    (["rag", "--dataset", "{q}", "--corpus", "{c}", "--generator", "extractive", "--conditions", "gold",
      "--output", "{tmp}/no/such/out.json"], "folder .* does not exist"),
])
def test_errors_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                                        message: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok?", "answers": ["a"]}\n{"question": 3}\n', encoding="utf-8")
    toml = tmp_path / "rag.toml"
    toml.write_text('dataset = "x.jsonl"\ngenerator = "extractive"\nk = "five"\n', encoding="utf-8")
    paths = {"q": str(EXAMPLE / "questions.jsonl"), "c": str(EXAMPLE / "corpus.jsonl"), "bad": str(bad),
             "toml": str(toml), "tmp": str(tmp_path)}
    assert main([a.format(**paths) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evret: error: ") and "\n" not in err
    import re

    assert re.search(message, err), err


def test_results_json_is_plain_json(tmp_path: Path) -> None:
    output = tmp_path / "rag.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "10", "--output", str(output)]) == 0
    data = json.loads(output.read_text(encoding="utf-8"))  # no NaN: values that do not apply are null
    assert data["schema"] == "evret-rag" and data["schema_version"] == 1
    assert "NaN" not in output.read_text(encoding="utf-8")


# -- issue 33 (newcomer item 3): the judge of text-labelled retrieval is token-overlap, a choice, and recorded ---------
TEXT_LABELLED = ["rag", "--dataset", str(EXAMPLE.parent / "dataset.jsonl"), "--corpus",
                 str(EXAMPLE.parent / "corpus.jsonl"), "--retriever", "bm25", "--generator", "extractive",
                 "--conditions", "retrieved", "--resamples", "20"]


def test_text_labelled_retrieval_is_judged_by_token_overlap_by_default(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rag.json"
    assert main([*TEXT_LABELLED, "--output", str(out)]) == 0
    err = capsys.readouterr().err
    results = RagResults.from_json(out)
    # the bundled retrieval example: recall@5 0.955 with token-overlap, as `evret evaluate --judge token-overlap`
    assert results.retrieval["recall@5"] == pytest.approx(21 / 22)
    assert results.config["retrieval_judge"] == {"name": "token-overlap", "min_tokens": 2, "overlap_ratio": 0.6,
                                                 "query_boost": False}
    assert ("note: retrieval matches judged by the default judge, token-overlap (evret rag's default; evret "
            "evaluate's is contains)") in err
    # named: no note, and its matches
    assert main([*TEXT_LABELLED, "--retrieval-judge", "contains", "--output", str(out)]) == 0
    assert "note: retrieval matches judged by the default judge" not in capsys.readouterr().err
    results = RagResults.from_json(out)
    assert results.config["retrieval_judge"] == {"name": "contains", "remove_articles": False}
    assert results.retrieval["recall@5"] == pytest.approx(0.295, abs=5e-4)
    # options alone go to the default judge
    assert main([*TEXT_LABELLED, "--retrieval-judge-option", "overlap_ratio=0.9", "--output", str(out)]) == 0
    assert RagResults.from_json(out).config["retrieval_judge"]["overlap_ratio"] == 0.9
    # gold ids only (the library example): nothing is judged, so no note
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "20"]) == 0
    assert "note: retrieval matches judged" not in capsys.readouterr().err


def test_retrieval_judge_in_the_config_file_and_its_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "rag.toml"
    toml.write_text(f'dataset = "{EXAMPLE.parent / "dataset.jsonl"}"\ncorpus = "{EXAMPLE.parent / "corpus.jsonl"}"\n'
                    'retriever = "bm25"\ngenerator = "extractive"\nconditions = ["retrieved"]\nn_resamples = 20\n'
                    '[retrieval_judge]\nname = "token-overlap"\noverlap_ratio = 0.8\ncolour = "red"\n',
                    encoding="utf-8")
    assert main(["rag", "--config", str(toml)]) == 2
    err = capsys.readouterr().err
    assert (f"judge 'token-overlap': option 'colour' (from {toml} [retrieval_judge]) is not an option of this judge; "
            f"accepted options: min_tokens, overlap_ratio, query_boost") in err
    toml.write_text(toml.read_text().replace('colour = "red"\n', ""), encoding="utf-8")
    out = tmp_path / "rag.json"
    assert main(["rag", "--config", str(toml), "--output", str(out)]) == 0
    assert RagResults.from_json(out).config["retrieval_judge"]["overlap_ratio"] == 0.8
    assert main(["rag", "--config", str(toml), "--retrieval-judge-option", "overlap_ratio=2"]) == 2
    assert "overlap_ratio must be in (0, 1], got 2.0 (options from --retrieval-judge-option" in capsys.readouterr().err
    assert main([*TEXT_LABELLED, "--retrieval-judge", "token_overlap"]) == 2
    assert "unknown judge 'token_overlap'" in capsys.readouterr().err


def test_retrieval_judge_secrets_are_redacted(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from evret_core.testing.llm_provider import stub_options
    from evret_core.testing.llm_stubs import StubLLMServer, always, isolate_llm_env

    isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
    with StubLLMServer(always("YES")) as server:
        options = {**stub_options(server), "api_key": "sk-SECRET-4242-judge", "cache": False}
        flags = [x for k, v in options.items() for x in ("--retrieval-judge-option", f"{k}={v}")]
        out = tmp_path / "rag.json"
        assert main([*TEXT_LABELLED, "--retrieval-judge", "llm", *flags, "--dry-run"]) == 0
        assert server.requests == []  # a dry run retrieves to build the contexts, and judges nothing
        assert main([*TEXT_LABELLED, "--retrieval-judge", "llm", *flags, "--output", str(out)]) == 0
        assert server.requests  # the judge was asked
    text = out.read_text(encoding="utf-8")
    assert "sk-SECRET-4242-judge" not in text
    assert json.loads(text)["config"]["retrieval_judge"]["name"] == "llm"


def test_python_api_judges_text_labels_by_token_overlap() -> None:
    from evret_core import create_retriever
    from evret_core.rag import QuestionSet, RagEvaluator

    questions = QuestionSet.load(EXAMPLE.parent / "dataset.jsonl", EXAMPLE.parent / "corpus.jsonl")
    bm25 = create_retriever("bm25", corpus=questions.corpus)
    results = RagEvaluator(bm25, conditions=["retrieved"], n_resamples=20).evaluate(questions)
    assert results.retrieval["recall@5"] == pytest.approx(21 / 22)
    assert results.config["retrieval_judge"]["name"] == "token-overlap"
    named = RagEvaluator(bm25, conditions=["retrieved"], n_resamples=20, retrieval_judge="contains").evaluate(questions)
    assert named.config["retrieval_judge"]["name"] == "contains"
    assert named.retrieval["recall@5"] < results.retrieval["recall@5"]
