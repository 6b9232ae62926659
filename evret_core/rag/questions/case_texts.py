"""The text of each context a RAG run gave its generator, for the HTML report's drill-down.

RAG results store context ids only (a run's texts would make every results file the size of its corpus times its
conditions). Given the question set the run used, a context's text is found again: a corpus document's from the
corpus, a counterfactual's forged document by replacing the answer span of its source document with the planted
value (``info``: ``source_doc``, ``span``, ``planted_answer``), a question's own fake passages from the question,
and an injected document from its template and canary (``info``: ``template``, ``canary``). A context none of these
gives (a cases file's own document) has no text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evret_core.rag.perturb.perturbations import INJECTION_TEMPLATES, SPLIT_PARTS
from evret_core.rag.questions.question_sets import QuestionSet, RagQuestion


def planted_texts(info: Mapping[str, Any], question: RagQuestion | None, questions: QuestionSet) -> dict[str, str]:
    """The texts of the documents an adversarial case added, by id, rebuilt from its ``info``."""
    out: dict[str, str] = {}
    family = info.get("family")
    if family == "counterfactual":
        forged = [d for d in info.get("forged_docs") or [] if isinstance(d, str)]
        if forged and question is not None and info.get("planted_from") == "question":
            out.update(zip(forged, question.counterfactual_passages, strict=False))
        span, source, planted = info.get("span"), info.get("source_doc"), info.get("planted_answer")
        text = questions.text_of(source) if isinstance(source, str) else None
        if (isinstance(info.get("forged_doc"), str) and text is not None and isinstance(planted, str)
                and isinstance(span, list) and len(span) == 2 and all(isinstance(x, int) for x in span)
                and 0 <= span[0] <= span[1] <= len(text)):
            out[info["forged_doc"]] = text[: span[0]] + planted + text[span[1]:]
    elif family == "injection":
        injected = [d for d in info.get("injected_docs") or [] if isinstance(d, str)]
        canary, template = info.get("canary"), info.get("template")
        if isinstance(canary, str) and template == "split":
            out.update(zip(injected, (SPLIT_PARTS[0], SPLIT_PARTS[1].format(canary=canary)), strict=False))
        elif isinstance(canary, str) and isinstance(template, str) and INJECTION_TEMPLATES.get(template):
            out.update({d: INJECTION_TEMPLATES[template].format(canary=canary) for d in injected[:1]})
    return out


def context_text(doc_id: str, planted: Mapping[str, str], questions: QuestionSet) -> str | None:
    """One context's text: a planted document's (see :func:`planted_texts`), else the corpus's, else None."""
    return planted.get(doc_id) or questions.text_of(doc_id)
