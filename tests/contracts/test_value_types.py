"""The contracts' value types are frozen dataclasses that check what they are given as pydantic did when they were
models: per type a table of inputs and what they become (or the exception they raise), equality and hashing, the
repr, ``dataclasses.replace``, assignment refused, and a pickle round trip of every contracts dataclass (Ray sends
them to its workers)."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import pickle
import pkgutil
import re
from collections import OrderedDict, deque
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

import evret_core.contracts as contracts
from evret_core.contracts.claims import ClaimTask, ClaimVerdict
from evret_core.contracts.conversation import RewriteRequest, Turn
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import GenerateRun, JudgeRun, RewriteRun
from evret_core.contracts.generation import Answer, Claim, Context, GenerationRequest
from evret_core.contracts.judge import JudgmentContext
from evret_core.contracts.kinds import JUDGE, Kind
from evret_core.contracts.output import OutputResults
from evret_core.contracts.perturb import ConditionCase
from evret_core.contracts.provider import ChatMessage, LLMResponse
from evret_core.contracts.rag_score import ScoreInput
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult
from evret_core.contracts.values import value_type
from evret_core.rag.questions.question_sets import RagQuestion


def _outcome(build: Any) -> Any:
    """What ``build()`` gives, or the type of the exception it raises."""
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - the table names the exception type it expects
        return type(exc)


RR = [  # RetrievalResult(**kwargs) -> the (doc_id, score, metadata) it holds, or the exception type
    ({"doc_id": "d1"}, ("d1", 0.0, {})),
    ({"doc_id": 7}, ("7", 0.0, {})),
    ({"doc_id": 1.5}, ("1.5", 0.0, {})),
    ({"doc_id": Decimal("2")}, ("2", 0.0, {})),
    ({"doc_id": b"d"}, ("d", 0.0, {})),
    ({"doc_id": True}, TypeError),
    ({"doc_id": None}, TypeError),
    ({"doc_id": np.int64(7)}, TypeError),
    ({"doc_id": "d", "score": 1}, ("d", 1.0, {})),
    ({"doc_id": "d", "score": "0.5"}, ("d", 0.5, {})),
    ({"doc_id": "d", "score": " 0.5 "}, ("d", 0.5, {})),
    ({"doc_id": "d", "score": True}, ("d", 1.0, {})),
    ({"doc_id": "d", "score": np.float32(0.25)}, ("d", 0.25, {})),
    ({"doc_id": "d", "score": np.int64(3)}, ("d", 3.0, {})),
    ({"doc_id": "d", "score": Decimal("0.5")}, ("d", 0.5, {})),
    ({"doc_id": "d", "score": None}, TypeError),
    ({"doc_id": "d", "score": "abc"}, ValueError),
    ({"doc_id": "d", "score": 10**400}, ValueError),
    ({"doc_id": "d", "metadata": {"text": "t"}}, ("d", 0.0, {"text": "t"})),
    ({"doc_id": "d", "metadata": OrderedDict(a=1)}, ("d", 0.0, {"a": 1})),
    ({"doc_id": "d", "metadata": MappingProxyType({"a": 1})}, ("d", 0.0, {"a": 1})),
    ({"doc_id": "d", "metadata": None}, TypeError),
    ({"doc_id": "d", "metadata": [("a", 1)]}, TypeError),
    ({"doc_id": "d", "text": "t"}, TypeError),  # unknown keyword
    ({}, TypeError),  # doc_id is required
]


@pytest.mark.parametrize(("kwargs", "expected"), RR)
def test_retrieval_result_checks_and_converts(kwargs: dict[str, Any], expected: Any) -> None:
    got = _outcome(lambda: RetrievalResult(**kwargs))
    if isinstance(expected, type):
        assert got is expected
    else:
        assert (got.doc_id, got.score, got.metadata) == expected
        assert type(got.doc_id) is str and type(got.score) is float and type(got.metadata) is dict


def test_retrieval_result_takes_keywords_only_and_reads_its_text() -> None:
    with pytest.raises(TypeError):
        RetrievalResult("d1", 0.5)  # type: ignore[misc]
    assert RetrievalResult(doc_id="d", metadata={"text": 3}).text == "3"
    assert RetrievalResult(doc_id="d").text is None


def test_ranked_columns_become_the_results_the_checked_constructor_makes() -> None:
    """``RankedColumns.to_results`` (the adapters' object path) builds without the checks what
    ``RetrievalResult(...)`` would store: ids made str and scores float from any column, each row's metadata the
    dict given (not a copy), a mapping that is not a dict converted and anything else refused as the constructor
    does; the objects compare, repr, pickle and refuse assignment like any other."""
    metadata = [{"text": "a", "distance": 0.5}, {"text": None}, MappingProxyType({"k": 1})]
    columns = RankedColumns(np.array([7, 8, 9]), np.array([3, 2, 1]), ["a", None, "c"])
    results = columns.to_results(metadata=metadata)
    checked = [RetrievalResult(doc_id=d, score=s, metadata=m)
               for d, s, m in zip(["7", "8", "9"], [3.0, 2.0, 1.0], metadata, strict=True)]
    assert results == checked and [repr(r) for r in results] == [repr(r) for r in checked]
    assert [vars(r) for r in results] == [vars(r) for r in checked]
    assert all(type(r.doc_id) is str and type(r.score) is float and type(r.metadata) is dict for r in results)
    assert results[0].metadata is metadata[0] and results[2].metadata == {"k": 1}
    assert [r.text for r in results] == ["a", None, None]  # the text is the metadata's, the column is not read
    assert pickle.loads(pickle.dumps(results)) == results
    with pytest.raises(dataclasses.FrozenInstanceError):
        results[0].score = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        RankedColumns(["d"], [1.0]).to_results(metadata=[["not", "a", "mapping"]])  # type: ignore[list-item]
    with pytest.raises(EvretError, match="2 metadata dicts for 1 rows"):
        RankedColumns(["d"], [1.0]).to_results(metadata=[{}, {}])
    plain = RankedColumns(("d1", "d2"), [0.5, np.float32(0.25)], ["t", None]).to_results()
    assert plain == [RetrievalResult(doc_id="d1", score=0.5, metadata={"text": "t"}),
                     RetrievalResult(doc_id="d2", score=0.25)]


JC = [  # JudgmentContext(query=..., expected_text="e", retrieved_text="r", **kwargs) -> (query, aliases) or error
    ({"aliases": ["a", "b"]}, ("q", ("a", "b"))),
    ({"aliases": ("a",)}, ("q", ("a",))),
    ({"aliases": {"a"}}, ("q", ("a",))),
    ({"aliases": iter(["a"])}, ("q", ("a",))),
    ({"aliases": (b"x",)}, ("q", ("x",))),
    ({"aliases": "ab"}, TypeError),
    ({"aliases": ("a", 1)}, TypeError),
    ({"aliases": None}, TypeError),
    ({"aliases": {"a": 1}}, TypeError),
    ({"query": b"bytes"}, ("bytes", ())),
    ({"query": 1}, TypeError),
    ({"query": None}, TypeError),
    ({"retrieved_text": 1}, TypeError),
    ({"expected_text": None}, TypeError),
    ({"other": "x"}, TypeError),  # pydantic ignored an unknown keyword; a dataclass refuses it
]


@pytest.mark.parametrize(("kwargs", "expected"), JC)
def test_judgment_context_checks_and_converts(kwargs: dict[str, Any], expected: Any) -> None:
    got = _outcome(lambda: JudgmentContext(**{"query": "q", "expected_text": "e", "retrieved_text": "r", **kwargs}))
    if isinstance(expected, type):
        assert got is expected
    else:
        assert (got.query, got.aliases) == expected and type(got.aliases) is tuple


def test_judgment_contexts_are_hashable_values_with_the_models_repr() -> None:
    a = JudgmentContext(query="q", expected_text="e", retrieved_text="r", aliases=["x"])
    b = JudgmentContext(query="q", expected_text="e", retrieved_text="r", aliases=("x",))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != dataclasses.replace(a, retrieved_text="other")
    assert a.expected_variants == ("e", "x")
    assert repr(a) == "JudgmentContext(query='q', expected_text='e', retrieved_text='r', aliases=('x',))"
    with pytest.raises(TypeError):
        JudgmentContext("q", "e", "r")  # type: ignore[misc]


ANSWERS = [  # Answer(**kwargs) -> its repr, or the exception type
    ({}, "Answer(text='', claims=[], refused=False, escalated=False, clarified=False, metadata={})"),
    ({"text": "t", "claims": [{"text": "c"}]},
     "Answer(text='t', claims=[Claim(text='c', citations=[])], refused=False, escalated=False, clarified=False, metadata={})"),
    ({"claims": ({"text": "c", "citations": ("d1",)},)},
     "Answer(text='', claims=[Claim(text='c', citations=['d1'])], refused=False, escalated=False, clarified=False, metadata={})"),
    ({"claims": [Claim(text="c")]},
     "Answer(text='', claims=[Claim(text='c', citations=[])], refused=False, escalated=False, clarified=False, metadata={})"),
    ({"text": b"t", "refused": "yes", "escalated": 0, "metadata": OrderedDict(n=1)},
     "Answer(text='t', claims=[], refused=True, escalated=False, clarified=False, metadata={'n': 1})"),
    ({"refused": 1.0, "escalated": np.True_},
     "Answer(text='', claims=[], refused=True, escalated=True, clarified=False, metadata={})"),
    ({"text": None}, TypeError),
    ({"text": 1}, TypeError),
    ({"claims": None}, TypeError),
    ({"claims": [1]}, TypeError),
    ({"claims": [{"text": 1}]}, TypeError),
    ({"claims": [{"text": "c", "extra": 1}]}, TypeError),
    ({"claims": [{"citations": []}]}, TypeError),
    ({"refused": None}, TypeError),
    ({"refused": 2}, ValueError),
    ({"refused": "maybe"}, ValueError),
    ({"metadata": None}, TypeError),
    ({"extra": 1}, TypeError),
]


@pytest.mark.parametrize(("kwargs", "expected"), ANSWERS)
def test_answer_checks_and_converts(kwargs: dict[str, Any], expected: Any) -> None:
    got = _outcome(lambda: Answer(**kwargs))
    assert (got if isinstance(expected, type) else repr(got)) == expected


CLAIMS = [  # Claim(text="c", citations=...) -> its citations, or the exception type
    (("d1",), ["d1"]),
    (["d1", "d2"], ["d1", "d2"]),
    ({"d1"}, ["d1"]),
    (deque(["d1"]), ["d1"]),
    (iter(["d1"]), ["d1"]),
    ("d1", TypeError),
    ([1], TypeError),
    (None, TypeError),
]


@pytest.mark.parametrize(("citations", "expected"), CLAIMS)
def test_claim_checks_and_converts(citations: Any, expected: Any) -> None:
    got = _outcome(lambda: Claim(text="c", citations=citations))
    assert got is expected if isinstance(expected, type) else got.citations == expected
    if not isinstance(expected, type):
        assert type(got.citations) is list


def test_answer_claim_errors_name_the_field() -> None:
    with pytest.raises(TypeError, match=r"^claims\.1\.text: expected a string, got int$"):
        Answer(claims=[{"text": "ok"}, {"text": 1}])
    with pytest.raises(TypeError, match=r"^claims\.0\.extra: not a field of a claim$"):
        Answer(claims=[{"text": "c", "extra": 1}])
    with pytest.raises(ValueError, match=r"^refused: 2 is not a boolean$"):
        Answer(refused=2)


OUTPUTS = [  # OutputResults(evaluator="e", **kwargs) -> (mean, scores, unmeasured), or the exception type
    ({"mean": None, "scores": []}, (None, [], [])),
    ({"mean": "0.5", "scores": (1, None, "0.5", True)}, (0.5, [1.0, None, 0.5, 1.0], [])),
    ({"mean": np.float64(0.5), "scores": [np.float32(0.5)]}, (0.5, [0.5], [])),
    ({"mean": None, "scores": [], "unmeasured": [1.0, "2", True]}, (None, [], [1, 2, 1])),
    ({"mean": None, "scores": [], "unmeasured": [1.5]}, ValueError),
    ({"mean": None, "scores": None}, TypeError),
    ({"scores": []}, TypeError),  # mean is required
    ({"mean": None, "scores": [], "details": None}, TypeError),
    ({"mean": None, "scores": [], "details": [1]}, TypeError),
    ({"mean": None, "scores": [], "stats": None}, TypeError),
]


@pytest.mark.parametrize(("kwargs", "expected"), OUTPUTS)
def test_output_results_check_and_convert(kwargs: dict[str, Any], expected: Any) -> None:
    got = _outcome(lambda: OutputResults(evaluator="e", **kwargs))
    assert got is expected if isinstance(expected, type) else (got.mean, got.scores, got.unmeasured) == expected


def test_list_bearing_values_compare_by_value_and_are_unhashable_as_before() -> None:
    answer = Answer(text="t", claims=[Claim(text="c", citations=["d1"])])
    assert answer == Answer(text="t", claims=[{"text": "c", "citations": ("d1",)}])
    for value in (answer, RetrievalResult(doc_id="d"), OutputResults(evaluator="e", mean=None, scores=[])):
        with pytest.raises(TypeError):
            hash(value)
    assert repr(RetrievalResult(doc_id="d", score=0.5)) == "RetrievalResult(doc_id='d', score=0.5, metadata={})"
    assert repr(OutputResults(evaluator="e", mean=None, scores=[None], unmeasured=[0])) == (
        "OutputResults(evaluator='e', mean=None, scores=[None], details=[], unmeasured=[0], stats={})")


def _samples() -> dict[type, Any]:
    """One instance of every dataclass the contracts define."""
    context = Context(doc_id="d1", text="Bees dance.")
    answer = Answer(text="Bees dance.", claims=[Claim(text="Bees dance.", citations=["d1"])], metadata={"n": 1})
    verdict = ClaimVerdict(claim="Bees dance.", citations=["d1"], verdict="supported", supporting=["d1"])
    question = RagQuestion(question_id="q1", question="Do bees dance?", answers=["yes"])
    return {
        Kind: JUDGE,  # a row of the kinds table: its base class pickles by reference
        RetrievalResult: RetrievalResult(doc_id="d1", score=0.5, metadata={"text": "Bees dance."}),
        RankedColumns: RankedColumns(["d1", "d2"], [0.5, 0.25], ["a", None]),
        JudgmentContext: JudgmentContext(query="q", expected_text="e", retrieved_text="r", aliases=("x",)),
        Context: context,
        Claim: answer.claims[0],
        Answer: answer,
        GenerationRequest: GenerationRequest(question_id="q1", question="Do bees dance?", contexts=(context,),
                                             condition="gold"),
        OutputResults: OutputResults(evaluator="exact", mean=0.5, scores=[1.0, 0.0, None], details=[{}, {}, {}],
                                     unmeasured=[2], stats={"n": 3}),
        ConditionCase: ConditionCase([context], "answer", {"family": "noise"}, None),
        ClaimTask: ClaimTask(question="Do bees dance?", claims=(answer.claims[0],), contexts=(context,)),
        ClaimVerdict: verdict,
        ChatMessage: ChatMessage(role="user", content="Hello"),
        LLMResponse: LLMResponse(text="Hi", input_tokens=3, output_tokens=1, model="m", raw={"id": "x"}),
        JudgeRun: JudgeRun([True, None, False], {"calls": 3}),
        Turn: Turn("agent", "Bees dance."),
        RewriteRequest: RewriteRequest("c:2", "why?", (Turn("user", "Do bees dance?"),), "c"),
        RewriteRun: RewriteRun(["why do bees dance", None], {"calls": 2}),
        GenerateRun: GenerateRun({("q1", "gold"): answer}, {"generator": {"calls": 1}}),
        ScoreInput: ScoreInput(question=question, condition="gold", contexts=(context,), answer=answer,
                               verdicts=(verdict,), expected_behaviour="answer"),
    }


def _contracts_dataclasses() -> set[type]:
    found = set()
    for info in pkgutil.iter_modules(contracts.__path__):
        module = importlib.import_module(f"{contracts.__name__}.{info.name}")
        found |= {obj for obj in vars(module).values()
                  if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__}
    return found


def test_every_contracts_dataclass_is_frozen_and_has_a_sample() -> None:
    classes = _contracts_dataclasses()
    assert classes == set(_samples()), "add a sample of each new contracts dataclass to _samples"
    assert [c.__name__ for c in classes if not c.__dataclass_params__.frozen] == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", list(_samples()), ids=lambda c: c.__name__)
def test_contracts_dataclasses_pickle_replace_and_refuse_assignment(cls: type) -> None:
    value = _samples()[cls]
    again = pickle.loads(pickle.dumps(value))
    assert type(again) is cls and again == value and vars(again) == vars(value)
    field = dataclasses.fields(value)[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field.name, getattr(value, field.name))
    assert dataclasses.replace(value) == value


def test_replace_runs_the_checks_again() -> None:
    result = RetrievalResult(doc_id="d", score=0.5)
    assert dataclasses.replace(result, score="0.25").score == 0.25
    with pytest.raises(TypeError):
        dataclasses.replace(result, doc_id=None)
    answer = dataclasses.replace(Answer(text="t"), claims=[{"text": "c"}])
    assert answer.claims == [Claim(text="c")]



def _twin(cls: type) -> type:
    """A plain ``@dataclass(frozen=True)`` with ``cls``'s name and fields and nothing else: what the value types
    behaved as when ``dataclass`` generated their methods."""
    specs = [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory,
                                                compare=f.compare, hash=f.hash, repr=f.repr, kw_only=f.kw_only))
             for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(cls.__name__, specs, frozen=True)


def _as_twin(value: Any, twin: type) -> Any:
    return twin(**{f.name: getattr(value, f.name) for f in dataclasses.fields(value)})


@pytest.mark.parametrize("cls", list(_samples()), ids=lambda c: c.__name__)
def test_value_types_behave_as_generated_frozen_dataclasses(cls: type) -> None:
    """Equality, hash, repr, refused assignment and deletion, pickling, ``replace`` and ``asdict`` of every
    contracts value type are those of a frozen dataclass with the same fields, whose methods ``dataclass``
    generates (the value types share them from ``Value`` instead)."""
    value, twin = _samples()[cls], _twin(cls)
    same = _as_twin(value, twin)
    assert repr(value) == repr(same)
    assert str(value) == str(same)
    try:
        expected_hash: Any = hash(same)
    except TypeError as exc:
        expected_hash = str(exc)
        with pytest.raises(TypeError, match=re.escape(str(exc))):
            hash(value)
    else:
        assert hash(value) == expected_hash
    again = pickle.loads(pickle.dumps(value))
    assert again == value and not (again != value) and repr(again) == repr(value) and again is not value
    assert (value == _as_twin(value, twin)) is False and value.__eq__(object()) is NotImplemented
    for f in dataclasses.fields(value):
        with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field '{f.name}'"):
            setattr(value, f.name, None)
        with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field '{f.name}'"):
            delattr(value, f.name)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'other'"):
        value.other = 1  # type: ignore[attr-defined]
    assert dataclasses.replace(value) == value and dataclasses.asdict(value) == dataclasses.asdict(same)
    assert [f.name for f in dataclasses.fields(value)] == [f.name for f in dataclasses.fields(twin)]
    assert cls.__match_args__ == twin.__match_args__  # type: ignore[attr-defined]
    assert cls.__dataclass_params__.frozen and cls.__dataclass_params__.eq  # type: ignore[attr-defined]


@pytest.mark.parametrize("cls", list(_samples()), ids=lambda c: c.__name__)
def test_value_types_compare_field_by_field_as_generated_equality_does(cls: type) -> None:
    """Two values differing in one field are unequal, with the same order of comparison as the generated
    ``__eq__`` (a tuple of the fields: an identical NaN compares equal)."""
    value = _samples()[cls]
    fields = dataclasses.fields(value)
    twin = _twin(cls)
    for f in fields:
        other = object()
        changed = copy.copy(value)
        object.__setattr__(changed, f.name, other)
        assert (changed == value) is (_as_twin(changed, twin) == _as_twin(value, twin)) is False
    nan = float("nan")
    a, b = copy.copy(value), copy.copy(value)
    object.__setattr__(a, fields[0].name, nan)
    object.__setattr__(b, fields[0].name, nan)
    assert a == b and _as_twin(a, twin) == _as_twin(b, twin)


def test_a_dataclass_may_derive_from_a_value_type_as_from_a_frozen_dataclass() -> None:
    """A plugin's frozen dataclass deriving from a value type gets its own generated methods over all the fields;
    a non-frozen one is refused as deriving from any frozen dataclass is; a plain subclass keeps the type's
    fields frozen and may set other attributes."""

    @dataclasses.dataclass(frozen=True)
    class Tagged(ChatMessage):
        tag: str = "t"

    tagged = Tagged("user", "hi")
    assert repr(tagged).endswith("Tagged(role='user', content='hi', tag='t')")
    assert tagged != ChatMessage("user", "hi") and hash(tagged) == hash(("user", "hi", "t"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        tagged.tag = "u"  # type: ignore[misc]
    with pytest.raises(TypeError, match="non-frozen dataclass from a frozen one"):
        dataclasses.dataclass(type("Loose", (ChatMessage,), {"__annotations__": {"x": "int"}, "x": 0}))

    class Plain(ChatMessage):
        pass

    plain = Plain("user", "hi")
    plain.note = "kept"  # type: ignore[attr-defined]
    assert plain.note == "kept" and repr(plain).endswith(".Plain(role='user', content='hi')")  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plain.role = "assistant"  # type: ignore[misc]
    assert plain != ChatMessage("user", "hi") and plain == Plain("user", "hi")


def test_a_value_containing_itself_repr_as_dataclasses_do() -> None:
    loop: list[Any] = []
    response = LLMResponse(text="t", raw={"loop": loop})
    loop.append(response)
    assert repr(response) == "LLMResponse(text='t', input_tokens=0, output_tokens=0, model=None, raw={'loop': [...]})"


def test_value_type_refuses_a_class_not_deriving_from_value() -> None:
    with pytest.raises(TypeError, match="derives from Value"):
        value_type(type("Loose", (), {}))
