"""Removing credentials from whatever Evret writes or shows: results' config, manifests, reports, error messages.

Two kinds of secrets are found:

- by name: an option or field whose name has a part ``key``, ``token``, ``secret``, ``password`` (and a few
  relatives: ``apikey``, ``passwd``, ``credential``, ``auth``, ``signature``) has its value replaced. Name parts
  are split at ``_``, ``-``, ``.`` and case changes, so ``api_key``, ``X-Api-Key`` and ``accessToken`` count, but
  ``max_tokens`` and ``min_tokens`` (plural counts) do not.
- in URLs: the password (or a lone user name, often a token) of ``scheme://user:pass@host``, and query
  parameters named as above (``?api-key=...``, ``&sig=...``, ``X-Amz-Signature=...``).

Redaction replaces values with ``***`` and never fails: it is applied to data that must still be written.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from evret_core.results import EvaluationResults

__all__ = ["MASK", "is_secret_name", "redact", "redact_results", "redact_text", "redact_url"]

MASK = "***"

SECRET_WORDS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "credentials", "auth",
    "authorization", "signature", "sig", "cookie",
})

_NAME_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>`]+")
_USERINFO = re.compile(r"(?<=/)([^\s/:@'\"]+):(?!\*\*\*@)[^\s/@'\"]+@")
_PARAM = re.compile(r"([?&])([^=&\s?#'\"]+)=(?!\*\*\*)([^&\s#'\"]+)")


def is_secret_name(name: str) -> bool:
    """Whether an option, field or query parameter called ``name`` holds a secret (see the module docs)."""
    parts = {p.lower() for p in _NAME_PARTS.findall(str(name))}
    return bool(parts & SECRET_WORDS) or str(name).lower() in SECRET_WORDS


def redact_url(url: str) -> str:
    """``url`` with its user-info credentials and secret query parameters replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if colon else f"{MASK}@{host}"
    query = "&".join(_redact_param(p) for p in parts.query.split("&")) if parts.query else parts.query
    fragment = "&".join(_redact_param(p) for p in parts.fragment.split("&")) if "=" in parts.fragment \
        else parts.fragment
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _redact_param(param: str) -> str:
    name, eq, value = param.partition("=")
    return f"{name}={MASK}" if eq and value and is_secret_name(name) else param


def redact_text(text: str) -> str:
    """``text`` (an error message, a log line) with every URL in it redacted, and URL-like pieces too (a path
    made from a URL loses a slash: ``http:/user:pass@host``)."""
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    if "=" in text:
        text = _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if is_secret_name(m.group(2))
                          else m.group(0), text)
    return text


def redact(value: Any, name: str | None = None) -> Any:
    """A copy of ``value`` (nested dicts, lists and strings) with secrets replaced: values under secret-looking
    names, and credentials in URLs anywhere. ``name`` is the key ``value`` sits under, when it has one."""
    if name is not None and is_secret_name(name) and value not in (None, "", MASK) and \
            not isinstance(value, (dict, list, tuple, bool)):
        return MASK
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value


def redact_results(results: EvaluationResults) -> EvaluationResults:
    """``results`` with its ``config``, ``manifest`` and ``stats`` redacted (in place; returned for chaining), as
    for a results file written before redaction existed, before it goes into a report."""
    results.config = redact(results.config)
    results.stats = redact(results.stats)
    if results.manifest is not None:
        data = redact(results.manifest.model_dump())
        results.manifest = type(results.manifest).model_validate(data)
    return results
