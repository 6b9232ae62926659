"""One config style (issue 25 part 4): ``evret rag`` reads its settings into a typed ``RagConfig``, on the same base,
``ComponentSpec`` and layering as ``evret evaluate``'s ``EvaluateConfig``, usable from Python."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from evret_core import EvretError
from evret_core.cli import main
from evret_core.evaluation.config import EvaluateConfig
from evret_core.io.run_config import ComponentSpec, Config
from evret_core.rag.rag_config import RagConfig

from .conftest import EXAMPLE

QUESTIONS, CORPUS = str(EXAMPLE / "questions.jsonl"), str(EXAMPLE / "corpus.jsonl")


def plain(spec: ComponentSpec) -> tuple[str, dict[str, object]]:
    return spec.name, spec.options


def settings(*argv: str) -> RagConfig:
    from evret_core.cli import build_parser
    from evret_core.cli.rag import settings_from

    args = build_parser().parse_args(["rag", *argv])
    assert isinstance(args, argparse.Namespace)
    return settings_from(args)


def test_one_base_and_one_component_spec_for_both_commands() -> None:
    assert issubclass(RagConfig, Config) and issubclass(EvaluateConfig, Config)
    assert RagConfig.model_fields["generator"].annotation is ComponentSpec
    assert EvaluateConfig.model_fields["retriever"].annotation is ComponentSpec


def test_from_toml_reads_paths_relative_to_the_file_and_keeps_the_defaults() -> None:
    config = RagConfig.from_toml(EXAMPLE / "rag.toml")
    assert config.dataset == QUESTIONS and config.corpus == CORPUS and config.k == 3
    assert config.retriever is not None and plain(config.retriever) == ("bm25", {})
    assert plain(config.generator) == ("extractive", {"threshold": 0.5})
    assert config.generator.source_of("threshold") == f"{EXAMPLE / 'rag.toml'} [generator]"
    assert (config.claim_judge.name, config.relevance.name, config.n_resamples, config.seed, config.pipelined,
            config.correct_f1, config.confidence_level) == ("token-overlap", "lexical", 1000, 0, True, 0.5, 0.95)


def test_a_toml_answers_file_is_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "rag.toml").write_text(f'dataset = "{QUESTIONS}"\ngenerator = "answers.jsonl"\n', encoding="utf-8")
    assert RagConfig.from_toml(tmp_path / "rag.toml").generator.name == str(tmp_path / "answers.jsonl")


def test_python_and_the_cli_give_the_same_run(tmp_path: Path) -> None:
    out = tmp_path / "cli.json"
    assert main(["rag", "--dataset", QUESTIONS, "--corpus", CORPUS, "--generator", "extractive", "--conditions",
                 "gold", "--resamples", "20", "--no-progress", "--output", str(out)]) == 0
    results = RagConfig(dataset=QUESTIONS, corpus=CORPUS, generator="extractive", conditions=["gold"],
                        n_resamples=20, output=str(tmp_path / "py.json")).evaluate()
    cli = json.loads(out.read_text(encoding="utf-8"))
    py = json.loads((tmp_path / "py.json").read_text(encoding="utf-8"))
    assert cli["generation"] == py["generation"] and cli["per_question"] == py["per_question"]
    assert json.loads(results.to_json())["generation"] == py["generation"]


@pytest.mark.parametrize(("toml", "message"), [
    ('k = "five"\n', "rag.toml: option 'k': has the wrong type (str)"),
    ("k = 0\n", "rag.toml: option 'k': must be an integer from 1 to 100000, got 0"),
    ("seed = -1\n", "rag.toml: option 'seed': must be an integer from 0 to"),
    ("pipelined = 1\n", "rag.toml: option 'pipelined': has the wrong type (int)"),
    ("colour = 1\n", "rag.toml: option 'colour': unknown setting; known settings are adversarial,"),
    ('conditions = ["gold", 3]\n', "rag.toml: option 'conditions': must be a list of names"),
    ('dataset_format = "csv"\n', "rag.toml: option 'dataset_format': unknown format 'csv'; use rgb"),
    ("[claim_judge]\nmin_tokens = 2\n", "rag.toml: option 'claim_judge.name': missing or not a string"),
    ("correct_f1 = 2\n", "rag.toml: option 'correct_f1': must be a number in [0, 1]"),
])
def test_file_errors_name_the_file_and_option(tmp_path: Path, toml: str, message: str) -> None:
    (tmp_path / "rag.toml").write_text(f'dataset = "{QUESTIONS}"\ngenerator = "extractive"\n{toml}',
                                       encoding="utf-8")
    with pytest.raises(EvretError) as err:
        RagConfig.from_toml(tmp_path / "rag.toml")
    assert str(err.value).startswith(str(tmp_path / "rag.toml")) and message in str(err.value)


def test_python_errors_name_the_model() -> None:
    with pytest.raises(EvretError, match=r"^RagConfig: option 'k': must be an integer from 1 to 100000, got 0$"):
        RagConfig.validated({"dataset": QUESTIONS, "generator": "extractive", "k": 0})
    with pytest.raises(EvretError, match=r"^RagConfig: option 'generator': missing$"):
        RagConfig.validated({"dataset": QUESTIONS})


def test_flags_win_and_a_part_named_again_drops_the_files_options(tmp_path: Path) -> None:
    config = settings("--config", str(EXAMPLE / "rag.toml"), "-k", "4", "--seed", "7", "--staged")
    assert (config.k, config.seed, config.pipelined) == (4, 7, False)
    assert config.generator.options == {"threshold": 0.5}  # the same generator: the file's options stay
    other = settings("--config", str(EXAMPLE / "rag.toml"), "--generator", "llm", "--generator-option", "model=m")
    assert plain(other.generator) == ("llm", {"model": "m"})  # not the extractive threshold
    assert other.generator.source_of("model") == "--generator-option"
    judged = settings("--config", str(EXAMPLE / "rag.toml"), "--claim-judge-option", "min_tokens=2")
    assert plain(judged.claim_judge) == ("token-overlap", {"min_tokens": 2})  # the default's
    with pytest.raises(EvretError, match=r"^--seed must be an integer from 0 to \d+, got -1$"):
        settings("--config", str(EXAMPLE / "rag.toml"), "--seed", "-1")
