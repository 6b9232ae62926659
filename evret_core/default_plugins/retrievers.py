"""Built-in retriever: ``run``, a precomputed run read from a TREC run file or a JSON file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evret_core.errors import EvretError
from evret_core.hookspecs import Register, hookimpl


def precomputed_run(path: str | None = None, **options: Any) -> Any:
    """A run computed elsewhere: ``path`` is a TREC run file (``qid Q0 docid rank score tag``) or a ``.json``
    file ``{qid: {docid: score}}`` / ``{qid: [docid, ...]}``. Every query of the dataset must be in it (or pass
    ``--missing-queries zero``)."""
    from evret_core.metrics.trec import read_run
    from evret_core.retrievers import PrecomputedRetriever

    options.pop("dataset", None)
    if options:
        raise EvretError(f"retriever run: unknown option(s) {', '.join(sorted(options))}; it takes path=FILE")
    if not path:
        raise EvretError("retriever run: option 'path' is missing (--retriever-option path=RUN_FILE)")
    file = Path(path)
    if not file.is_file():
        raise EvretError(f"retriever run: {file}: no such run file")
    if file.suffix.lower() == ".json":
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise EvretError(f"{file}: not a JSON run ({exc})") from None
        if not isinstance(data, dict):
            raise EvretError(f"{file}: a JSON run is an object {{query_id: {{doc_id: score}}}}")
        return PrecomputedRetriever(data)
    return PrecomputedRetriever(read_run(file))


@hookimpl
def register_retrievers(register: Register) -> None:
    register("run", precomputed_run)
