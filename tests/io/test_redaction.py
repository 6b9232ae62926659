"""Issue 33, the one redaction rule (red-team groups F1 and F10, 2026-11-28): every shape a credential takes in an
option, a URL or a message is masked by :func:`redact_text` and :func:`redact`, and so in everything that goes
through them (results, manifests, errors, recipe reprs, MLflow). End-to-end cases: test_tracking_server.py,
the evret-opensearch plugin's tests and test_calibrate_old_results below."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.io.redact import (
    MASK,
    is_secret_name,
    known_secrets,
    redact,
    redact_text,
    redact_url,
    url_secrets,
)
from evret_core.plugins.recipes import Recipe

from .._paths import REPO

PW = "S3cret-pw-77"

# (text, what it must become): the password is gone and everything else is kept
TEXTS = [
    # scheme-less user info (OS2, OS5d, RC05): alone, with a path, inside a message, after an option name
    (f"admin:{PW}@127.0.0.1:19200", "admin:***@127.0.0.1:19200"),
    (f"admin:{PW}@search.example.com:9200/bees/_search", "admin:***@search.example.com:9200/bees/_search"),
    (f"[index 'bees' at admin:{PW}@127.0.0.1:19200] (options from --retriever-option)",
     "[index 'bees' at admin:***@127.0.0.1:19200] (options from --retriever-option)"),
    (f"url=admin:{PW}@localhost:9200", "url=admin:***@localhost:9200"),
    (f"hosts: ['admin:{PW}@h1:9200', 'admin:{PW}@h2:9200']", "hosts: ['admin:***@h1:9200', 'admin:***@h2:9200']"),
    (f"admin:{PW}@host.", "admin:***@host."),
    # a password holding '@' or ':' is masked whole, up to the host
    (f"admin:p@ss:{PW}@db.internal:5432", "admin:***@db.internal:5432"),
    # network-path references and IPv6 hosts
    (f"//u:{PW}@h/x", "//u:***@h/x"),
    (f"admin:{PW}@[::1]:9200", "admin:***@[::1]:9200"),
    (f"http://admin:{PW}@[fe80::1%25eth0]:9200/", "http://admin:***@[fe80::1%25eth0]:9200/"),
    # scheme URLs, as before (a lone user name there is often a token)
    (f"http://u:{PW}@h:5000/ok", "http://u:***@h:5000/ok"),
    (f"https://{PW}@github.com/o/r.git", "https://***@github.com/o/r.git"),
    (f"redis://:{PW}@cache:6379/0", "redis://:***@cache:6379/0"),
    (f"mongodb://u:{PW}@h1:27017,h2:27017/db", "mongodb://u:***@h1:27017,h2:27017/db"),
    # query-string tokens, with or without a scheme
    (f"localhost:9200/_search?access_token={PW}&size=3", "localhost:9200/_search?access_token=***&size=3"),
    (f"https://b.s3.amazonaws.com/k?X-Amz-Signature={PW}&X-Amz-Date=1", "https://b.s3.amazonaws.com/k?X-Amz-Signature=***&X-Amz-Date=1"),
    # libpq key=value DSNs, quoted or not (RC06), and ;-separated connection strings
    (f"host=db user=u password={PW} dbname=x", "host=db user=u password=*** dbname=x"),
    (f"host=db password='my {PW}' port=5432", "host=db password=*** port=5432"),
    (f"Endpoint=sb://x.net/;SharedAccessKey={PW};EntityPath=q", "Endpoint=sb://x.net/;SharedAccessKey=***;EntityPath=q"),
    (f"--api-key={PW} --model m", "--api-key=*** --model m"),
    # JSON and Python reprs holding a secret key (RC09), whatever the value's shape (RC03, RC04)
    (f'{{"password": "{PW}", "user": "admin"}}', '{"password": "***", "user": "admin"}'),
    (f"{{'http_auth': ('admin', '{PW}'), 'timeout': 3}}", "{'http_auth': ***, 'timeout': 3}"),
    (f"{{'Authorization': ['Bearer {PW}']}}", "{'Authorization': ***}"),
    (f'{{"token": {json.dumps(PW)}}}', '{"token": "***"}'),
    # an HTTP authorization value echoed by a server (ML07d)
    ("bad credentials Basic dTpFY2hvUFctNDU0NQ==", "bad credentials Basic ***"),
    (f"Authorization: Bearer {PW}", "Authorization: Bearer ***"),
    (f"authorization: token {PW}.x", "authorization: token ***"),
]

# text that holds no secret and must stay as it is
PLAIN = [
    "git@github.com:org/repo.git",
    "mail bob@example.com about it",
    "ssh deploy@10.0.0.5",
    "see http://example.com/a?size=3&model=m",
    "the answer is 10:30 at the station",
    "max_tokens=5 min_tokens=2 judge=token-overlap",
    "Basic authentication failed; a Bearer token is needed",
    "unknown key 'corpus'",
    "score 0.5:1 in [0, 1]",
    "--judge-option 'colour': write it as KEY=VALUE",  # a usage hint's metavariables
]


@pytest.mark.parametrize(("text", "expected"), TEXTS, ids=[t[0][:40] for t in TEXTS])
def test_every_shape_of_credential_is_masked_in_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact_text(expected) == expected  # masking twice changes nothing


@pytest.mark.parametrize("text", PLAIN)
def test_text_without_a_secret_is_kept(text: str) -> None:
    assert redact_text(text) == text


def test_redact_url_masks_a_url_without_a_scheme() -> None:
    """The adapters name their server with redact_url (OpenSearch's 'url' accepts 'admin:PW@host:9200')."""
    assert redact_url(f"admin:{PW}@127.0.0.1:19200") == "admin:***@127.0.0.1:19200"
    assert redact_url(f"127.0.0.1:9200/?token={PW}") == "127.0.0.1:9200/?token=***"
    assert redact_url("localhost:9200") == "localhost:9200"


# (options, what redact() makes of them): a secret-named key hides any value but an empty one or a switch
OPTIONS = [
    ({"http_auth": ("admin", PW)}, {"http_auth": MASK}),  # RC04
    ({"headers": {"Authorization": [f"Bearer {PW}"]}}, {"headers": {"Authorization": MASK}}),  # RC03
    ({"password": PW.encode()}, {"password": MASK}),
    ({"bearer": PW}, {"bearer": MASK}),  # RC12
    ({"dsn": f"host=db user=u password={PW} dbname=x"}, {"dsn": "host=db user=u password=*** dbname=x"}),  # RC06
    ({"client_options": json.dumps({"password": PW})}, {"client_options": '{"password": "***"}'}),  # RC09
    ({"url": f"admin:{PW}@localhost:9200"}, {"url": "admin:***@localhost:9200"}),  # RC05
    ({"hosts": [f"admin:{PW}@h1:9200", {"host": "h2", "http_auth": ["a", PW]}]},
     {"hosts": ["admin:***@h1:9200", {"host": "h2", "http_auth": MASK}]}),
    # kept: nothing to hide, switches, counts
    ({"token": None, "api_key": "", "use_auth": True, "tokens": [], "max_tokens": 5, "auth": ()},
     {"token": None, "api_key": "", "use_auth": True, "tokens": [], "max_tokens": 5, "auth": ()}),
]


@pytest.mark.parametrize(("options", "expected"), OPTIONS, ids=[str(i) for i in range(len(OPTIONS))])
def test_redact_and_the_recipe_repr_hide_every_shape(options: dict[str, object], expected: dict[str, object]) -> None:
    assert redact(options) == expected
    shown = repr(Recipe("retriever", "opensearch", options))
    assert PW not in shown and PW.encode().hex() not in shown, shown


def test_bearer_is_a_secret_name() -> None:
    assert is_secret_name("bearer") and is_secret_name("bearer_token") and is_secret_name("passphrase")
    assert not any(is_secret_name(n) for n in ("max_tokens", "keyword", "tokenizer", "dsn", "hosts"))


def test_known_secrets_take_scheme_less_urls_and_their_basic_header() -> None:
    """A password given as 'url=admin:PW@host' is masked wherever it appears, and so is the base64 'user:PW' that
    an HTTP client sends for it (a server may echo the Authorization header in its error)."""
    found = known_secrets(["evaluate", "--retriever-option", f"url=admin:{PW}@h:9200",
                           "--mlflow", "http://u:Track%40PW-9090@127.0.0.1:5000"])
    basic = base64.b64encode(f"admin:{PW}".encode()).decode()
    assert PW in found and basic in found
    assert base64.b64encode(b"u:Track@PW-9090").decode() in found  # the password as sent: percent-decoded
    assert redact_text(f"401 bad credentials Basic {basic}; retry", found) == "401 bad credentials Basic ***; retry"
    assert sorted(url_secrets(f"at admin:{PW}@h:9200 and http://x:{PW}2@h")) == [PW, f"{PW}2"]
    assert known_secrets(["--dataset", "bob@example.com"]) == []


# -- SECX6: a results file written before this redaction, corrected by calibrate ---------------------------------
def test_calibrate_does_not_copy_a_secret_of_an_older_results_file(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "base.json"
    assert main(["evaluate", "--config", str(REPO / "examples" / "eval.toml"), "--resamples", "20",
                 "--no-progress", "--output", str(results)]) == 0
    document = json.loads(results.read_text(encoding="utf-8"))
    secrets = {"url": f"admin:OLDNS-{PW}@10.0.0.1:9200", "dsn": f"host=db password=DSN-{PW}",
               "http_auth": ["admin", f"TUPLE-{PW}"], "api_key": f"sk-OLD-{PW}"}
    document["config"]["retriever"].update(secrets)
    document["manifest"]["retriever"] = {**document["manifest"].get("retriever", {}), **secrets}
    old = tmp_path / "old.json"
    old.write_text(json.dumps(document), encoding="utf-8")  # as a version of Evret without the rule wrote it
    out = tmp_path / "ppi.json"
    capsys.readouterr()
    assert main(["calibrate", "--results", str(old), "--ppi-truth", str(results), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    written = out.read_text(encoding="utf-8")
    for where, text in (("output", written), ("stdout", captured.out), ("stderr", captured.err)):
        assert PW not in text, where
    assert json.loads(written)["config"]["retriever"]["url"] == "admin:***@10.0.0.1:9200"
