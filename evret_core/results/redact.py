"""Removing credentials from whatever Evret writes or shows: results' config, manifests, reports, error messages.

Two kinds of secrets are found:

- by name: an option, field or environment variable whose name has a part ``key``, ``token``, ``secret``,
  ``password`` (and a few relatives: ``apikey``, ``passwd``, ``credential``, ``auth``, ``signature``) has its
  value replaced. Name parts are split at ``_``, ``-``, ``.`` and case changes, so ``api_key``, ``X-Api-Key`` and
  ``accessToken`` count, and so does a part that ends in one of the long words (``PGPASSWORD``, ``authtoken``),
  but ``max_tokens`` and ``min_tokens`` (plural counts) do not.
- in URLs: the password (or a lone user name, often a token) of ``scheme://user:pass@host``, and query
  parameters named as above (``?api-key=...``, ``&sig=...``, ``X-Amz-Signature=...``).
- by value: the secrets a caller knows (a provider's API key, :func:`known_secrets` of the command line and the
  environment) wherever they appear in a text.

This is the one redaction rule of Evret: results, RAG results, calibration files, manifests, reports, error
messages and ``--debug`` tracebacks all pass through it. Redaction replaces values with ``***`` and never fails:
it is applied to data that must still be written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from evret_core.results.evaluation import EvaluationResults

__all__ = ["MASK", "is_secret_name", "known_secrets", "redact", "redact_results", "redact_text", "redact_url",
           "redact_sections", "url_secrets"]

MASK = "***"

SECRET_WORDS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "credentials", "auth",
    "authorization", "signature", "sig", "cookie",
})

# a name part ending in one of these is a secret too (PGPASSWORD, authtoken); "key" is left out (hotkey, monkey)
_SECRET_ENDINGS = ("password", "passwd", "secret", "token", "apikey", "credential", "credentials")
# a known secret shorter than this is not masked in free text: it would mask ordinary words and numbers
MIN_KNOWN_SECRET = 4
# environment variables whose names read as secrets but hold none: the shell's working folders ("pwd" is also the
# abbreviation of password); masking their values masked every path under the current folder in messages
NOT_SECRET_VARIABLES = frozenset({"PWD", "OLDPWD"})
_NAME_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>`]+")
_USERINFO = re.compile(r"(?<=/)([^\s/:@'\"]+):(?!\*\*\*@)[^\s/@'\"]+@")
_PARAM = re.compile(r"([?&])([^=&\s?#'\"]+)=(?!\*\*\*)([^&\s#'\"]+)")


def is_secret_name(name: str) -> bool:
    """Whether an option, field or query parameter called ``name`` holds a secret (see the module docs)."""
    parts = {p.lower() for p in _NAME_PARTS.findall(str(name))}
    if parts & SECRET_WORDS or str(name).lower() in SECRET_WORDS:
        return True
    return any(p.endswith(_SECRET_ENDINGS) for p in parts)


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


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` (an error message, a log line, a traceback) with every URL in it redacted, URL-like pieces too (a
    path made from a URL loses a slash: ``http:/user:pass@host``), and each of the known ``secrets`` (values of
    at least :data:`MIN_KNOWN_SECRET` characters; longest first, so a secret holding another is masked whole)."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_KNOWN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    if "=" in text:
        text = _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if is_secret_name(m.group(2))
                          else m.group(0), text)
    return text


def url_secrets(text: str) -> list[str]:
    """The values :func:`redact_text` hides in the URLs of ``text``: passwords (or lone user names) of the user
    info and secret query parameters. They are masked wherever else they appear, too (:func:`known_secrets`)."""
    found: list[str] = []
    for match in _URL.finditer(text):
        try:
            parts = urlsplit(match.group(0))
        except ValueError:
            continue
        if "@" in parts.netloc:
            user, colon, password = parts.netloc.rpartition("@")[0].partition(":")
            found.append(password if colon else user)
        for param in (parts.query + "&" + parts.fragment).split("&"):
            name, eq, value = param.partition("=")
            if eq and value and is_secret_name(name):
                found.append(value)
    return [f for f in found if f and f != MASK]


def known_secrets(argv: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> list[str]:
    """Values that must never be printed: environment variables and ``KEY=VALUE`` or ``--flag VALUE`` options
    with a secret name (:func:`is_secret_name`; not ``PWD`` and ``OLDPWD``, the shell's working folders), and the
    secrets of URLs (:func:`url_secrets`) in either. Values under 6 characters are left out (a short value would
    mask ordinary words)."""
    env = os.environ if environ is None else environ
    found = [value for name, value in env.items() if is_secret_name(name) and name not in NOT_SECRET_VARIABLES]
    for value in env.values():
        if "://" in value:
            found += url_secrets(value)
    for i, arg in enumerate(argv):
        if arg.startswith("--") and "=" not in arg:
            if is_secret_name(arg[2:]) and i + 1 < len(argv):
                found.append(argv[i + 1])
        else:
            for pair in (arg, arg.partition("=")[2]):  # KEY=VALUE, or --flag=KEY=VALUE
                name, sep, value = pair.partition("=")
                if sep and is_secret_name(name.lstrip("-")):
                    found.append(value)
        if "://" in arg:
            found += url_secrets(arg)
    return sorted({v for v in found if len(v) >= 6}, key=len, reverse=True)


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


SECTIONS = ("config", "stats", "manifest")
"""The sections of a results document that describe the run (options, URLs, error messages) rather than its data:
what :func:`redact_sections` redacts before any file is written."""


def redact_sections(document: dict[str, Any], sections: Sequence[str] = SECTIONS) -> dict[str, Any]:
    """A shallow copy of ``document`` (a results file's top-level object) with its ``sections`` redacted; the data
    (per-query texts, scores) is written as it is. Every writer of a results-like file calls this."""
    return {key: redact(value) if key in sections else value for key, value in document.items()}


def redact_results(results: EvaluationResults) -> EvaluationResults:
    """``results`` with its ``config``, ``manifest`` and ``stats`` redacted (in place; returned for chaining), as
    for a results file written before redaction existed, before it goes into a report."""
    results.config = redact(results.config)
    results.stats = redact(results.stats)
    if results.manifest is not None:
        data = redact(results.manifest.model_dump())
        results.manifest = type(results.manifest).model_validate(data)
    return results
