"""Every unknown name a user types gets the likeliest meant name ("did you mean ...?"), from one helper:
registered names of every kind, conditions, adversarial families, component and LLM options, config settings,
argparse choices and a subcommand's unknown options (which name that subcommand's usage, not evret's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.contracts.errors import EvretError, did_you_mean

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EVALUATE = ["evaluate", "--dataset", str(EXAMPLES / "dataset.jsonl"), "--retriever", "bm25",
            "--retriever-option", f"corpus={EXAMPLES / 'corpus.jsonl'}", "--metric", "recall@5", "--no-progress"]


@pytest.mark.parametrize(("name", "known", "meant"), [
    ("recal", ["ndcg", "recall", "mrr"], "recall"),           # a typo
    ("token_overlap", ["contains", "token-overlap"], "token-overlap"),  # '_' for '-'
    ("bm-25", ["bm25", "dense"], "bm25"),                     # a stray '-'
    ("contain", ["contains", "exact"], "contains"),           # a prefix of one name
    ("any", ["first_match", "any_match"], "any_match"),       # a prefix, far in edit distance
    ("--metrics", ["--metric", "--matching", "--judge"], "--metric"),
    ("EXACT", ["exact", "regex"], "exact"),                   # case
])
def test_the_helper_names_the_likeliest_meant_name(name: str, known: list[str], meant: str) -> None:
    assert did_you_mean(name, known) == f" (did you mean {meant}?)"


def test_the_helper_says_nothing_when_nothing_is_close() -> None:
    assert did_you_mean("nope", ["ndcg", "recall", "mrr"]) == ""
    assert did_you_mean("r", ["recall", "rbp", "r_precision"]) == ""  # an ambiguous prefix names none
    assert did_you_mean("x", []) == ""


@pytest.mark.parametrize(("flags", "hint"), [
    (["--metric", "recal@5"], "unknown metric 'recal' (did you mean recall?); known metrics: "),
    (["--judge", "token_overlap"], "unknown judge 'token_overlap' (did you mean token-overlap?); known judges: "),
    (["--judge", "contain"], "unknown judge 'contain' (did you mean contains?)"),
    (["--executor", "lcoal"], "unknown executor 'lcoal' (did you mean local?)"),
    (["--judge", "token-overlap", "--judge-option", "overlap_ration=0.5"],
     "option 'overlap_ration' (from --judge-option) is not an option of this judge (did you mean overlap_ratio?)"),
    (["--retriever-option", "corpuss=x"], "option 'corpuss' (from --retriever-option) is not an option of this "
                                          "retriever (did you mean corpus?)"),
])
def test_evaluate_suggests_names(flags: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*EVALUATE, *flags]) == 2
    assert hint in capsys.readouterr().err


def test_a_retriever_name_is_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a if a != "bm25" else "bm-25" for a in EVALUATE]
    assert main(argv) == 2
    assert "unknown retriever 'bm-25' (did you mean bm25?)" in capsys.readouterr().err


def test_every_registered_kind_suggests() -> None:
    from evret_core.plugins.registry import (
        create_claim_judge,
        create_evaluator,
        create_generator,
        create_llm_provider,
        create_perturbation,
    )

    for create, typo, meant in ((create_generator, "extractve", "extractive"),
                                (create_llm_provider, "opnai", "openai"),
                                (create_evaluator, "exat", "exact"),
                                (create_perturbation, "counterfactul", "counterfactual"),
                                (create_claim_judge, "lexcal", "lexical")):
        with pytest.raises(EvretError, match=rf"\(did you mean {meant}\?\)"):
            create(typo)


def test_conditions_families_and_llm_options_suggest() -> None:
    from evret_core.llm.settings import LLMSettings
    from evret_core.rag.perturb.cases import adversarial_conditions
    from evret_core.rag.questions.conditions import resolve_conditions

    with pytest.raises(EvretError, match=r"unknown condition 'gld' \(did you mean gold\?\)"):
        resolve_conditions(["gld"])
    with pytest.raises(EvretError, match=r"unknown adversarial family 'injecton' \(did you mean injection\?\)"):
        adversarial_conditions(["injecton"])
    with pytest.raises(EvretError, match=r"unknown option 'modle' \(did you mean model\?\)"):
        LLMSettings.build("llm generator", provider="openai", modle="x")


def test_a_config_setting_is_suggested(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "eval.toml"
    config.write_text(f'dataset = "{EXAMPLES / "dataset.jsonl"}"\nmetrics = ["recall@5"]\nmatchng = "any_match"\n'
                      f'[retriever]\nname = "bm25"\ncorpus = "{EXAMPLES / "corpus.jsonl"}"\n', encoding="utf-8")
    assert main(["evaluate", "--config", str(config), "--no-progress"]) == 2
    assert "option 'matchng': unknown setting (did you mean matching?); known settings are " in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "hint"), [
    (["--matching", "any"], "argument --matching: invalid choice: 'any' (did you mean any_match?)"),
    (["--metrics", "recall@5"], "unrecognized arguments: --metrics recall@5 (did you mean --metric?)"),
    (["--metrics=recall@5"], "unrecognized arguments: --metrics=recall@5 (did you mean --metric?)"),
])
def test_argparse_errors_suggest_and_show_the_subcommands_usage(
        flags: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*EVALUATE, *flags])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"evret evaluate: error: {hint}" in err
    assert err.startswith("usage: evret evaluate ")  # the subcommand's usage, not the top-level one


def test_an_unknown_argument_without_a_near_option_still_names_the_subcommand(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["trec", "a", "b", "--zzzzzz"])
    err = capsys.readouterr().err
    assert err.startswith("usage: evret trec ") and err.rstrip().endswith("unrecognized arguments: --zzzzzz")


def test_injection_templates_positions_and_question_types_suggest() -> None:
    from evret_core.rag.perturb.perturbations import INJECTION_TEMPLATES, Injection
    from evret_core.testsets.sampling import parse_mix

    template = next(iter(INJECTION_TEMPLATES))
    with pytest.raises(EvretError, match=rf"\(did you mean {template}\?\)"):
        Injection(templates=[template + "x"])
    with pytest.raises(EvretError, match=r"unknown injection position\(s\) midle \(did you mean middle\?\)"):
        Injection(positions=["midle"])
    with pytest.raises(EvretError, match=r"unknown question type\(s\) multihop \(did you mean multi-hop\?\)"):
        parse_mix("multihop=1")


def test_a_mistyped_subcommand_is_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["evalute", "--dataset", "d.jsonl"])
    assert exited.value.code == 2
    assert "invalid choice: 'evalute' (did you mean evaluate?)" in capsys.readouterr().err
