"""Removing credentials from whatever Evret writes or shows: results' config, manifests, reports, error messages.

Secrets are found

- by name: an option, field or environment variable whose name has a part ``key``, ``token``, ``secret``,
  ``password``, ``bearer`` (and a few relatives: ``apikey``, ``passwd``, ``passphrase``, ``credential``,
  ``auth``, ``signature``, ``cookie``) has its value replaced, whatever its shape (a string, a number, bytes, a
  list or tuple such as ``http_auth: ('admin', 'pw')``; a mapping is searched key by key; None, an empty value
  and true/false stay). Name parts are split at ``_``, ``-``, ``.`` and case changes, so ``api_key``,
  ``X-Api-Key`` and ``accessToken`` count, and so does a part that ends in one of the long words
  (``PGPASSWORD``, ``authtoken``), but ``max_tokens`` and ``min_tokens`` (plural counts) do not.
- in URLs, with a scheme or without one (``admin:pw@host:9200``, ``//u:pw@host``, IPv6 ``[::1]`` hosts): the
  password of the user info (with a scheme, also a lone user name, often a token: ``https://TOKEN@host``;
  without one ``user@host`` is an address, not a secret), and query parameters named as above
  (``?api-key=...``, ``&sig=...``, ``X-Amz-Signature=...``).
- in text: ``NAME=VALUE`` pairs with a secret name (libpq DSNs ``host=db password=...``, connection strings
  ``;AccountKey=...;``, ``--api-key=...``), quoted keys of JSON or Python reprs (``{"password": "..."}``,
  ``{'http_auth': ('admin', 'pw')}``), and HTTP credentials a server echoes (``Basic <base64>``,
  ``Bearer <token>``).
- by value: the secrets a caller knows (a provider's API key, :func:`known_secrets` of the command line and the
  environment, with the ``Basic`` header value of each URL's user and password) wherever they appear in a text.

This is the one redaction rule of Evret: results, RAG results, calibration files, manifests, reports, error
messages, recipe reprs, MLflow parameters, tags and artifacts, and ``--debug`` tracebacks all pass through it.
Redaction replaces values with ``***`` and never fails: it is applied to data that must still be written.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["MASK", "is_secret_name", "known_secrets", "redact", "redact_text", "redact_url", "url_secrets"]

MASK = "***"


class _Lazy:
    """A regular expression compiled on its first use: compiling this module's patterns costs more than the rest
    of it, and every plugin load imports it (through the SDK), most never to redact anything. After the first use
    the compiled pattern's methods are this object's own attributes."""

    def __init__(self, pattern: str) -> None:
        self.source = pattern

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(self.source)
        for method in ("findall", "finditer", "fullmatch", "match", "search", "sub"):
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)


SECRET_WORDS = frozenset({
    "key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "credentials", "auth",
    "authorization", "signature", "sig", "cookie", "bearer", "passphrase",
})

# a name part ending in one of these is a secret too (PGPASSWORD, authtoken); "key" is left out (hotkey, monkey)
_SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "apikey", "credential", "credentials")
# a known secret shorter than this is not masked in free text: it would mask ordinary words and numbers
MIN_KNOWN_SECRET = 4
# environment variables whose names read as secrets but hold none: the shell's working folders ("pwd" is also the
# abbreviation of password); masking their values masked every path under the current folder in messages
NOT_SECRET_VARIABLES = frozenset({"PWD", "OLDPWD"})
_NAME_PARTS = _Lazy(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_URL = _Lazy(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>`]+")
_USERINFO = _Lazy(r"(?<=/)([^\s/:@'\"]+):(?!\*\*\*@)[^\s/@'\"]+@")
# user:password@host[:port] without a scheme (opensearch-py takes "admin:pw@host:9200"), anywhere in a text: at
# the start, or after a space, a quote, a bracket, "=", ",", ";", "/" or "|". The password runs to the last "@"
# that a host follows (a password may hold "@" and ":"); it never holds a space, a quote or "/" (a URL's
# password must percent-encode "/"). The host is a name, an IPv4 or a [IPv6] address, ended by the end of the
# text, a port or a character that cannot continue a host. The lengths are bounded so that no text makes the
# search quadratic.
_HOST = r"(?:\[[0-9A-Za-z:.%]+\]|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)"
_BARE_USERINFO = _Lazy(
    r"(?<![^\s'\"(\[{,;=/|])(?P<user>[A-Za-z0-9._~%+-]{1,128}):(?P<password>[^\s'\"<>`/]{1,512})@"
    rf"(?P<host>{_HOST}(?::\d{{1,5}})?)(?=$|[\s/'\"?#,;)\]}}>\\]|\.(?![A-Za-z0-9])|:(?!\d))")
_PARAM = _Lazy(r"([?&])([^=&\s?#'\"]+)=(?!\*\*\*)([^&\s#'\"]+)")
# NAME=VALUE in free text (a libpq DSN, a connection string, a command line): at the start, or after a space or
# one of ? & ; , # ( [ {
_PAIR = _Lazy(r"(?<![^\s?&;,#(\[{])(?P<name>-{0,2}[A-Za-z_][A-Za-z0-9_.\-]*)=(?!\*\*\*)"
                   r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s&#;,'\"()\[\]{}<>]+)")
# a quoted key of JSON or of a Python repr, and its value: a string, a tuple or list (one level of nesting), or a
# number (a bare word after "'name': " is a message, as in "judge 'token-overlap': option 'x' ...")
_QUOTED_KEY = _Lazy(
    r"(?P<q>[\"'])(?P<name>[^\"'\s]{1,80})(?P=q)(?P<sep>\s*:\s*)(?P<value>b?\"(?:[^\"\\]|\\.)*\"|b?'(?:[^'\\]|\\.)*'"
    r"|\((?:[^()]|\([^()]*\))*\)|\[(?:[^\[\]]|\[[^\[\]]*\])*\]|-?[0-9][0-9A-Za-z.+-]*)")
# HTTP credentials as a header value (an echoed Authorization header): a scheme and a token
_AUTH_VALUE = _Lazy(r"(?<![A-Za-z0-9])(?P<scheme>(?i:basic|bearer|token|digest|negotiate|apikey))(?P<sp>\s+)"
                         r"(?P<token>[A-Za-z0-9._~+/=-]{8,})")
_EMPTY_VALUES = frozenset({"None", "null", "true", "false", "True", "False", "''", '""', "()", "[]"})


def is_secret_name(name: str) -> bool:
    """Whether an option, field or query parameter called ``name`` holds a secret (see the module docs)."""
    parts = {p.lower() for p in _NAME_PARTS.findall(str(name))}
    if parts & SECRET_WORDS or str(name).lower() in SECRET_WORDS:
        return True
    return any(p.endswith(_SECRET_ENDINGS) for p in parts)


def redact_url(url: str) -> str:
    """``url`` with its user-info credentials and secret query parameters replaced by ``***``; a URL without a
    scheme (``admin:pw@host:9200``, ``host:9200/?token=...``) too."""
    if "://" not in url and not url.startswith("//"):
        return _redact_pieces(url)
    try:
        parts = urlsplit(url)
    except ValueError:  # "Invalid IPv6 URL": what looks like credentials is still masked
        return _redact_pieces(url)
    netloc = parts.netloc
    if "@" in netloc and f"{MASK}@" not in netloc:
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
    return f"{name}={MASK}" if eq and value and value != MASK and is_secret_name(name) else param


def _bare_userinfo(match: re.Match[str]) -> str:
    if match.group("password") == MASK:
        return match.group(0)
    return f"{match.group('user')}:{MASK}@{match.group('host')}"


# a usage hint's metavariable ("write it as KEY=VALUE"): a word that names a value instead of being one
_PLACEHOLDERS = frozenset({"VALUE", "VALUES", "KEY", "TOKEN", "SECRET", "PASSWORD"})


def _pair(match: re.Match[str]) -> str:
    name, value = match.group("name"), match.group("value")
    if not is_secret_name(name.lstrip("-")) or not any(c.isalnum() for c in value) or value in _PLACEHOLDERS:
        return match.group(0)  # not a secret's name, or a hint: "api_key=...", "KEY=VALUE"
    return f"{name}={MASK}"


def _quoted_key(match: re.Match[str]) -> str:
    value = match.group("value")
    if not is_secret_name(match.group("name")) or value in _EMPTY_VALUES or value.strip("\"'") == MASK:
        return match.group(0)
    if value[-1:] in ("'", '"') and value[:1] in ("'", '"', "b"):  # a string: stays a string
        quote = value[-1]
        value = f"{quote}{MASK}{quote}"
    else:
        value = MASK
    return f"{match.group('q')}{match.group('name')}{match.group('q')}{match.group('sep')}{value}"


def _auth_value(match: re.Match[str]) -> str:
    token = match.group("token")
    if token.isalpha() and token.islower():  # a word ("Basic authentication"), not a credential
        return match.group(0)
    return f"{match.group('scheme')}{match.group('sp')}{MASK}"


def redact_text(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` (an error message, a log line, a traceback) with every credential the module docs list masked:
    URLs with or without a scheme (URL-like pieces too: a path made from a URL loses a slash,
    ``http:/user:pass@host``), secret ``NAME=VALUE`` pairs and quoted keys, echoed HTTP credentials, and each of
    the known ``secrets`` (values of at least :data:`MIN_KNOWN_SECRET` characters; longest first, so a secret
    holding another is masked whole)."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_KNOWN_SECRET}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    if "://" in text:
        text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    return _redact_pieces(text)


def _redact_pieces(text: str) -> str:
    """:func:`redact_text` but for URLs with a scheme: user info without one, pairs, quoted keys, HTTP values."""
    if "@" in text:
        text = _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
        text = _BARE_USERINFO.sub(_bare_userinfo, text)
    if "=" in text:
        text = _PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}={MASK}" if is_secret_name(m.group(2))
                          else m.group(0), text)
        text = _PAIR.sub(_pair, text)
    if ":" in text and ("'" in text or '"' in text):
        text = _QUOTED_KEY.sub(_quoted_key, text)
    if " " in text:
        text = _AUTH_VALUE.sub(_auth_value, text)
    return text


def _credentials(text: str) -> list[tuple[str, str | None]]:
    """The (user, password) of each URL's user info in ``text``, with or without a scheme (password None for a
    lone user name after a scheme), and ("", value) for each secret query parameter."""
    found: list[tuple[str, str | None]] = []
    for match in _URL.finditer(text):
        try:
            parts = urlsplit(match.group(0))
        except ValueError:
            continue
        if "@" in parts.netloc:
            user, colon, password = parts.netloc.rpartition("@")[0].partition(":")
            found.append((user, password) if colon else (user, None))
        for param in (parts.query + "&" + parts.fragment).split("&"):
            name, eq, value = param.partition("=")
            if eq and value and is_secret_name(name):
                found.append(("", value))
    bare = _URL.sub(" ", text)  # what is left: the URLs without a scheme
    found += [(m.group("user"), m.group("password")) for m in _BARE_USERINFO.finditer(bare)]
    found += [("", m.group(3)) for m in _PARAM.finditer(bare) if is_secret_name(m.group(2))]
    return found


def url_secrets(text: str) -> list[str]:
    """The values :func:`redact_text` hides in the URLs of ``text`` (with or without a scheme): passwords (or, after
    a scheme, lone user names) of the user info and secret query parameters. They are masked wherever else they
    appear, too (:func:`known_secrets`)."""
    found = [user if password is None else password for user, password in _credentials(text)]
    return [f for f in found if f and f != MASK]


def _basic_values(text: str) -> list[str]:
    """The ``Authorization: Basic`` value an HTTP client sends for each URL user and password in ``text`` (as
    written and percent-decoded), so that a server echoing the header is masked too."""
    out = []
    for user, password in _credentials(text):
        if user and password and password != MASK:
            for pair in {f"{user}:{password}", f"{unquote(user)}:{unquote(password)}"}:
                out.append(base64.b64encode(pair.encode("utf-8")).decode("ascii"))
    return out


def known_secrets(argv: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> list[str]:
    """Values that must never be printed: environment variables and ``KEY=VALUE`` or ``--flag VALUE`` options
    with a secret name (:func:`is_secret_name`; not ``PWD`` and ``OLDPWD``, the shell's working folders), the
    secrets of URLs (:func:`url_secrets`, with or without a scheme) in either, each percent-decoded, and the
    ``Basic`` header value of each URL's user and password. Values under 6 characters are left out (a short value
    would mask ordinary words)."""
    env = os.environ if environ is None else environ
    found = [value for name, value in env.items() if is_secret_name(name) and name not in NOT_SECRET_VARIABLES]
    texts = [value for value in env.values() if "@" in value or "://" in value]
    for i, arg in enumerate(argv):
        if arg.startswith("--") and "=" not in arg:
            if is_secret_name(arg[2:]) and i + 1 < len(argv):
                found.append(argv[i + 1])
        else:
            for pair in (arg, arg.partition("=")[2]):  # KEY=VALUE, or --flag=KEY=VALUE
                name, sep, value = pair.partition("=")
                if sep and is_secret_name(name.lstrip("-")):
                    found.append(value)
        if "@" in arg or "://" in arg:
            texts.append(arg)
    for text in texts:
        secrets = url_secrets(text)
        found += secrets + [unquote(s) for s in secrets] + _basic_values(text)
    return sorted({v for v in found if len(v) >= 6 and v != MASK}, key=len, reverse=True)


def _holds_secret(value: Any) -> bool:
    """Whether ``value``, found under a secret name, has something to hide (not None, empty or a switch)."""
    if value is None or isinstance(value, bool) or value == MASK:
        return False
    if isinstance(value, (str, bytes, bytearray, list, tuple, set, frozenset)):
        return len(value) > 0
    return True


def redact(value: Any, name: str | None = None) -> Any:
    """A copy of ``value`` (nested dicts, lists, tuples and strings) with secrets replaced: any value under a
    secret-looking name (a mapping is searched key by key instead), and credentials in the texts of any other
    (:func:`redact_text`). ``name`` is the key ``value`` sits under, when it has one."""
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if name is not None and is_secret_name(name) and _holds_secret(value):
        return MASK
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) for v in value)
    if isinstance(value, str):
        return redact_text(value)
    return value
