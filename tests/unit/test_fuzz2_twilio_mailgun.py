"""The twilio and mailgun schemes, fuzzed through `shared.signatures.verify`.

Properties, over generated input (hypothesis, derandomized):

- random bodies, content types, header values and URLs (ports, queries,
  IPv6, userinfo, bad ports) are verified or refused with a documented
  reason (`REASONS`); nothing else is raised;
- a genuine signature (`twilio.sign` / `mailgun.sign`) over random fields,
  URLs and tokens always verifies;
- a single-byte change of what is signed is refused: for Twilio, the URL and
  a JSON body byte for byte, a form as Twilio's own validator reads it
  (its fields sorted and concatenated: a change that keeps that text is the
  same request to Twilio too); for Mailgun, the timestamp and the token.

JW_FUZZ_EXAMPLES raises the example count (e.g. 5000 for a long run).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from urllib.parse import parse_qsl, urlencode

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twilio.request_validator import RequestValidator

from shared.signatures import SignatureError, mailgun, twilio, verify
from shared.signatures.errors import REASONS

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 200
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
NOW = 1_700_000_000
SECRET = "twilio-auth-token-0123456789"

_HOSTS = st.sampled_from(
    [
        "example.com",
        "Example.COM",
        "[::1]",
        "[2001:db8::1]",
        "[::1",
        "::1]",
        "user:pw@example.com",
        "user@[::1]",
        "a:b:c",
        "h\u00e9.example",
        "127.0.0.1",
        "",
        "x y",
    ]
)
_PORTS = st.sampled_from(
    ["", ":", ":443", ":80", ":8443", ":0", ":65535", ":65536", ":-1", ":x", ":99999999999"]
)
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
_QUERY = st.one_of(
    st.just(""),
    st.lists(st.tuples(_TEXT, _TEXT), max_size=4).map(lambda q: "?" + urlencode(q)),
    _TEXT.map(lambda t: "?" + t),
)
URLS = st.builds(
    lambda scheme, host, port, path, query, fragment: (
        f"{scheme}://{host}{port}{path}{query}{fragment}"
    ),
    st.sampled_from(["https", "http", "HTTPS", "ftp", ""]),
    _HOSTS,
    _PORTS,
    st.sampled_from(["", "/", "/hooks/twilio", "/a b", "/%zz", "/\u00e9"]),
    _QUERY,
    st.sampled_from(["", "#frag"]),
)
# URLs as the receiver is configured with: well-formed, any port and query.
GOOD_URLS = st.builds(
    lambda scheme, host, port, path, query: f"{scheme}://{host}{port}{path}{query}",
    st.sampled_from(["https", "http"]),
    st.sampled_from(
        ["example.com", "Hooks.Example.com", "[::1]", "[2001:db8::1]", "user:pw@h.example"]
    ),
    st.sampled_from(["", ":443", ":80", ":8443", ":1"]),
    st.sampled_from(["/", "/hooks/twilio", "/a/b%20c"]),
    st.lists(st.tuples(st.text("abcxyz_", min_size=1, max_size=5), _TEXT), max_size=3).map(
        lambda q: "?" + urlencode(q) if q else ""
    ),
)
CONTENT_TYPES = st.one_of(
    st.sampled_from(
        [
            "application/x-www-form-urlencoded",
            "APPLICATION/X-WWW-FORM-URLENCODED; charset=utf-8",
            "application/json",
            "text/plain",
            "",
            " application/x-www-form-urlencoded ;",
        ]
    ),
    _TEXT,
)
HEADER_VALUES = st.one_of(
    _TEXT,
    st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()),
    st.sampled_from(
        ["algorithm=HMAC_SHA256", "algorithm=hmac_sha1", "algorithm=MD5", "algorithm=", ",,="]
    ),
)
BODIES = st.one_of(
    st.binary(max_size=200),
    st.lists(st.tuples(_TEXT, _TEXT), max_size=6).map(lambda f: urlencode(f).encode()),
    st.dictionaries(_TEXT, _TEXT, max_size=4).map(lambda d: json.dumps(d).encode()),
)


def _outcome(scheme: str, headers: dict[str, str], body: bytes, url: str | None) -> str:
    """'ok' or the refusal's reason; any other exception fails the test."""
    try:
        verify(scheme, {}, headers, body, [SECRET], NOW, url=url)
    except SignatureError as exc:
        assert exc.reason in REASONS
        assert str(exc) == exc.reason
        return exc.reason
    return "ok"


@FUZZ
@given(
    url=st.one_of(URLS, st.none(), _TEXT),
    content_type=CONTENT_TYPES,
    signature=HEADER_VALUES,
    settings_value=st.one_of(st.none(), HEADER_VALUES),
    body=BODIES,
)
def test_twilio_answers_with_a_documented_reason(
    url: str | None, content_type: str, signature: str, settings_value: str | None, body: bytes
) -> None:
    headers = {"Content-Type": content_type, "X-Twilio-Signature": signature}
    if settings_value is not None:
        headers[twilio.SETTINGS_HEADER] = settings_value
    _outcome("twilio", headers, body, url)


@FUZZ
@given(url=URLS, body=BODIES, content_type=CONTENT_TYPES)
def test_twilio_signed_with_the_url_as_given_answers(
    url: str, body: bytes, content_type: str
) -> None:
    """A signature computed over a hostile URL (the receiver's configuration)
    still only verifies or refuses."""
    form = twilio.is_form(content_type)
    try:
        signature = twilio.sign(SECRET, url, body, form=form)
    except (SignatureError, UnicodeEncodeError):
        return  # the test helper cannot sign this: nothing to check
    _outcome("twilio", {"Content-Type": content_type, "X-Twilio-Signature": signature}, body, url)


def _official(url: str, body: bytes, form: bool) -> str:
    class Multi(dict[str, list[str]]):
        def getall(self, key: str) -> list[str]:
            return self[key]

    params: Multi = Multi()
    if form:
        for name, value in parse_qsl(body.decode(), keep_blank_values=True):
            params.setdefault(name, []).append(value)
    return RequestValidator(SECRET).compute_signature(url, params)


@FUZZ
@given(
    url=GOOD_URLS,
    fields=st.lists(st.tuples(_TEXT, _TEXT), max_size=6),
    document=st.dictionaries(_TEXT, _TEXT, max_size=4),
    form=st.booleans(),
    data=st.data(),
)
def test_twilio_genuine_verifies_and_a_changed_byte_is_refused(
    url: str,
    fields: list[tuple[str, str]],
    document: dict[str, str],
    form: bool,
    data: st.DataObject,
) -> None:
    if form:
        body = urlencode(fields).encode()
        content_type = twilio.FORM
    else:
        body = json.dumps(document).encode()
        content_type = "application/json"
        url += ("&" if "?" in url else "?") + "bodySHA256=" + hashlib.sha256(body).hexdigest()
    signature = twilio.sign(SECRET, url, body, form=form)
    headers = {"Content-Type": content_type, "X-Twilio-Signature": signature}
    assert _outcome("twilio", headers, body, url) == "ok"

    # one byte of the body or of the URL changed
    target = data.draw(st.sampled_from(["body", "url"]) if body else st.just("url"))
    raw = bytearray(body if target == "body" else url.encode())
    at = data.draw(st.integers(0, len(raw) - 1))
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != raw[at]))
    raw[at] = byte
    if target == "body":
        changed_body, changed_url = bytes(raw), url
    else:
        try:
            changed_url = raw.decode()
        except UnicodeDecodeError:
            return
        changed_body = body
    outcome = _outcome("twilio", headers, changed_body, changed_url)
    if outcome != "ok":
        return
    # Verified: only where Twilio's own validator reads the same signed text.
    assert form, "a JSON body or its URL changed by a byte verified"
    try:
        official = _official(changed_url, changed_body, form)
    except UnicodeDecodeError:
        raise AssertionError("a body Twilio cannot read verified") from None
    assert signature == official or _same_but_port(url, changed_url), (url, changed_url)


def _same_but_port(url: str, changed: str) -> bool:
    """Whether the change only added/removed the default port (both verify)."""
    return url.replace(":443", "").replace(":80", "") == changed.replace(":443", "").replace(
        ":80", ""
    )


# -------------------------------------------------------------------- mailgun

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_TEXT, children, max_size=3),
    max_leaves=8,
)
_SIG_FIELD = st.one_of(
    _JSON_VALUES,
    st.integers(-(2**70), 2**70),
    st.sampled_from(["", "0", "01", "1700000000", "17000000000000000", " 1700000000", "\u0661"]),
    st.text("0123456789abcdefABCDEF", min_size=60, max_size=66),
)


@FUZZ
@given(
    timestamp=_SIG_FIELD,
    token=st.one_of(_SIG_FIELD, st.text(min_size=1, max_size=300)),
    signature=_SIG_FIELD,
    extra=st.dictionaries(_TEXT, _JSON_VALUES, max_size=3),
    raw=st.one_of(st.none(), st.binary(max_size=100)),
)
def test_mailgun_answers_with_a_documented_reason(
    timestamp: object, token: object, signature: object, extra: dict[str, object], raw: bytes | None
) -> None:
    if raw is None:
        document = dict(extra)
        document["signature"] = {"timestamp": timestamp, "token": token, "signature": signature}
        body = json.dumps(document).encode()
    else:
        body = raw
    _outcome("mailgun", {}, body, None)


@FUZZ
@given(
    age=st.integers(-299, 299),
    token=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=256),
    event=st.dictionaries(_TEXT, _JSON_VALUES, max_size=3),
    data=st.data(),
)
def test_mailgun_genuine_verifies_and_a_changed_byte_is_refused(
    age: int, token: str, event: dict[str, object], data: st.DataObject
) -> None:
    signed = mailgun.sign(SECRET, NOW - age, token)
    body = json.dumps({"signature": signed, "event-data": event}).encode()
    assert _outcome("mailgun", {}, body, None) == "ok"

    field = data.draw(st.sampled_from(["timestamp", "token"]))
    value = bytearray(signed[field].encode())
    at = data.draw(st.integers(0, len(value) - 1))
    value[at] = data.draw(st.integers(0x20, 0x7E).filter(lambda b: b != value[at]))
    changed = dict(signed, **{field: value.decode()})
    body = json.dumps({"signature": changed, "event-data": event}).encode()
    assert _outcome("mailgun", {}, body, None) != "ok"


def test_twilio_public_url_urlsplit_refuses_is_bad_options() -> None:
    """An unbalanced `[` or a bracketed host that is no address in the public
    URL made `urlsplit` raise ValueError out of verify: it is `bad_options`
    (our configuration), as a bad port already was."""
    for url in ("https://[::1/hooks?bodySHA256=x", "https://[nothost]/hooks"):
        for content_type in ("application/json", twilio.FORM):
            headers = {"Content-Type": content_type, "X-Twilio-Signature": "AAAA"}
            assert _outcome("twilio", headers, b"a=b", url) == "bad_options"
