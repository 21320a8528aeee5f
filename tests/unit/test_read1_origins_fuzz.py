"""Credentials and next pages on named origins, read a second time (commits
9dde225, f1e5d2f).

Properties (hypothesis, derandomized):

- the credential check's fast path (a URL under the base URL with a plain path is
  the base URL's origin, not parsed again) never says yes where the origin the
  sender (httpx) reads says no: hostile suffixes (`@`, `\\`, percent-encoded
  authority, `//host`, IPv6 brackets, control characters) after base URLs with and
  without a path, a port, upper case, a trailing dot or an empty user;
- an `auth.extra_hosts` / `result.allowed_hosts` entry that loads is written back
  as it is compared (`host_entry` of its own output is itself), names a host (not
  an empty one: `"."` loaded as the host ""), and trusts the URL on the host and
  port it names; an internal host is refused whatever its trailing dots.

JW_FUZZ_EXAMPLES raises the example count.
"""

from __future__ import annotations

import os
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.providers import ConfigError, HttpRequest, RequestBuildError
from shared.providers.requests import (
    _credential_origins,
    _may_receive_credential,
    _origin_of,
    _split_entry,
    build_redirect,
    host_entry,
    resolve_url,
    trusts,
)
from tests.unit.test_url_review import described

EXAMPLES = int(os.environ.get("JW_FUZZ_EXAMPLES", "0")) or 500
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
BASES = [
    "https://api.acme.test",
    "https://api.acme.test/",
    "https://api.acme.test/v1",
    "https://api.acme.test/v1/",
    "https://API.Acme.test:443",
    "https://api.acme.test:8443/v1",
    "https://[::1]:8443",
    "http://127.0.0.1:9000/x",
    "HTTPS://api.acme.test",
    "https://@api.acme.test",
    "https://api.acme.test:",
    "https://api.acme.test.",
    "https://[::ffff:1.2.3.4]/v2",
]
EXTRA = ["files.acme.test", "blobs.acme.test:9443"]
DESCS = [described(base, auth={"extra_hosts": EXTRA}) for base in BASES]
_ATOMS = st.sampled_from(
    [
        "@", "\\", "/", "//", "?", "#", ":", "%40", "%2f", "%5c", "%2e", "evil.test",
        "[", "]", "::1", ":443", ":80", "%", "%zz", "..", ".", "user:pw@", "\t", "\n",
        " ", "é", "\x00", "%00", "\u3002", "HTTPS://", "api.acme.test", "files.acme.test",
    ]
)  # fmt: skip
_SUFFIXES = st.lists(
    st.one_of(_ATOMS, st.text(alphabet=string.printable, max_size=5)), max_size=8
).map("".join)


@FUZZ
@given(
    index=st.integers(0, len(DESCS) - 1),
    joint=st.sampled_from(["", "/", "//", ":", "@", "\\", "."]),
    suffix=_SUFFIXES,
)
def test_the_fast_path_never_gives_the_credential_where_the_origin_does_not(
    index: int, joint: str, suffix: str
) -> None:
    desc = DESCS[index]
    assert desc.auth is not None
    for url in (desc.base_url + joint + suffix, desc.base_url.rstrip("/") + "/" + suffix):
        slow = _origin_of(url) in _credential_origins(desc.base_url, desc.auth.extra_hosts)
        assert _may_receive_credential(desc, url) is slow, url


_ENTRY_ATOMS = st.sampled_from(
    [
        "[", "]", ":", "::", "1", "80", "443", "65535", "65536", "0", "a", "B", ".",
        "-", "xn--", "ü", "%", "%25", "127", "0x7f", "ffff", "::ffff:", "1.2.3.4",
        "localhost", "example.com", "_", "*", "\u3002", "\uff0e", "ß", "'", "!",
    ]
)  # fmt: skip


@FUZZ
@given(st.lists(_ENTRY_ATOMS, max_size=8).map("".join))
def test_an_entry_that_loads_is_compared_as_it_is_written_back(entry: str) -> None:
    try:
        text = host_entry(entry)
    except ValueError:
        return
    host, port = _split_entry(entry)
    assert host, f"{entry!r} names no host"
    assert host_entry(text) == text
    assert _split_entry(text) == (host, port)
    shown = f"[{host}]" if ":" in host else host
    origin = _origin_of(f"https://{shown}{f':{port}' if port else ''}/r")
    if origin is not None:  # `xn--` alone: an A-label the client cannot send
        assert origin[1] == host
        assert trusts(frozenset({text}), origin[1], origin[2])


@pytest.mark.parametrize("entry", [".", ".:80", "\u3002"])
def test_an_entry_naming_no_host_is_a_load_error(entry: str) -> None:
    """Before, `"."` loaded as the host "" (the trailing dot dropped): nothing is ""."""
    with pytest.raises(ConfigError, match=r"allowed_hosts: .*not a host name"):
        described(result={"allowed_hosts": [entry]})
    with pytest.raises(ConfigError, match=r"extra_hosts: .*not a host name"):
        described(auth={"extra_hosts": [entry]})


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1../x", "http://localhost../x", "http://metadata.localhost../x"]
)
def test_an_internal_host_with_trailing_dots_is_refused_when_built(url: str) -> None:
    """Before, one dot was dropped: `127.0.0.1.` is no address and `localhost.` no
    loopback name, so the URL passed as a public host; the connection then failed at
    the resolver on every attempt (an IDNA error, not a refusal), retried."""
    with pytest.raises(RequestBuildError, match="points at"):
        resolve_url(described(), url)


def test_a_redirect_keeps_the_credential_on_its_origins_and_never_gets_it_back() -> None:
    """README (`result.follow_redirects`): the credential goes on a hop to the origins
    it may go to (base_url's, an extra host's), and once a hop left them, on none after."""
    desc = described(auth={"extra_hosts": ["files.acme.test"]})
    first = HttpRequest(
        action="result",
        method="GET",
        url=desc.base_url + "/results/j1",
        headers={"Authorization": "Bearer k"},
        timeout=1.0,
        secret_headers=frozenset({"Authorization"}),
    )
    extra = build_redirect(desc, first, "https://files.acme.test/r")
    assert extra.headers.get("Authorization") == "Bearer k"
    away = build_redirect(desc, extra, "https://cdn.example/r?sig=x")
    assert "Authorization" not in away.headers
    back = build_redirect(desc, away, desc.base_url + "/results/j1")
    assert "Authorization" not in back.headers
