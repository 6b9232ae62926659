"""``with_choices``: a structured answer's schema that lists the values a field may take in this call.

A part that knows, per call, which strings a field may hold (the claim judge: the ids of the contexts it sent; a
criteria judge: the criterion's option names) asks with the model :func:`with_choices` returns: the same fields
and validation, and a JSON Schema whose ``enum`` names those values. A provider that constrains its output to the
schema (``transformers``) can then only answer with them, and every other provider reads them in the system
message. Validation is not changed: the part's own ``check`` still refuses other values with its own message.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, TypeVar, get_origin

from pydantic import BaseModel, create_model

M = TypeVar("M", bound=BaseModel)


def with_choices(model: type[M], **choices: Sequence[str]) -> type[M]:
    """``model`` with ``enum`` in the JSON Schema of each named field (a string, or a list of strings: then its
    items); a field given no values is left as it is. Built once per model and values."""
    items = tuple((name, tuple(dict.fromkeys(values))) for name, values in sorted(choices.items()) if values)
    return _build(model, items) if items else model


@lru_cache(maxsize=512)
def _build(model: type[M], items: tuple[tuple[str, tuple[str, ...]], ...]) -> type[M]:
    fields: dict[str, Any] = {}
    for name, values in items:
        info = copy.copy(model.model_fields[name])
        listed = get_origin(info.annotation) is list
        info.json_schema_extra = {"items": {"type": "string", "enum": list(values)}} if listed \
            else {"enum": list(values)}
        fields[name] = (info.annotation, info)
    built: type[M] = create_model(model.__name__, __base__=model, __doc__=model.__doc__, **fields)
    return built
