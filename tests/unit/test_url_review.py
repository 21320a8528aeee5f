"""Provider-given URLs checked as the sender parses them (a review's findings).

Before: a URL urllib accepts but httpx refuses reached the sender and failed
there on every attempt; a URL on an internal address (loopback, link-local
metadata, private) was fetched. Now every builder refuses both with a
RequestBuildError, which the reconciler turns into an escalation.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.providers import (
    ConfigError,
    HttpRequest,
    ProviderDescription,
    RequestBuildError,
    parse_providers,
)
from shared.providers.requests import (
    MAX_URL_CHARS,
    build_errors_page,
    build_redirect,
    build_status,
    configured_hosts,
    resolve_url,
)

BASE = "https://api.acme.test"


def described(base_url: str = BASE, **tables: Any) -> ProviderDescription:
    """The simulator preset at `base_url`, with its credential set (so auth exists)."""
    table: dict[str, Any] = {"preset": "simulator", "base_url": base_url, **tables}
    env = {"JW_SIM_API_KEY": "k"}
    return parse_providers({"providers": {"p": table}}, "config.toml", env)["p"]


INTERNAL = [
    "http://169.254.169.254/latest/meta-data/",  # the cloud metadata service
    "http://[fd00:ec2::254]/latest/meta-data/",  # its IPv6 address (unique local)
    "http://100.100.100.200/latest/meta-data/",  # Alibaba's (shared address space)
    "http://127.0.0.1/x",
    "http://127.0.0.2:8080/x",
    "http://10.0.0.5/x",
    "http://172.16.0.1/x",
    "http://192.168.1.1/x",
    "http://0.0.0.0/x",
    "http://224.0.0.1/x",
    "http://[::1]/x",
    "http://[::]/x",
    "http://[fe80::1]/x",
    "http://[::ffff:169.254.169.254]/x",  # v4-mapped
    "http://[::ffff:127.0.0.1]/x",
    "http://127.1/x",  # the short, integer, hex and octal forms getaddrinfo reads
    "http://2852039166/x",
    "http://0xa9fea9fe/x",
    "http://0251.0xfe.43518/x",
    "http://0x7f.1/x",
    "http://localhost/x",
    "http://LocalHost./x",
    "http://metadata.localhost/x",
    "http://user:pw@169.254.169.254/x",
    "http://[64:ff9b::a9fe:a9fe]/x",  # NAT64: the metadata service
    "http://[64:ff9b::a00:5]/x",  # NAT64: 10.0.0.5
    "http://[2002:a9fe:a9fe::1]/x",  # 6to4: the metadata service
    "http://[fec0::1]/x",  # site-local (deprecated, still routed in places)
    "http://[64:ff9b:1::a00:5]/x",  # local-use NAT64: no public service there
]


@pytest.mark.parametrize("url", INTERNAL)
def test_a_url_on_an_internal_address_is_refused(url: str) -> None:
    desc = described()
    with pytest.raises(RequestBuildError, match=r"points at .*result\.allowed_hosts"):
        resolve_url(desc, url)
    with pytest.raises(RequestBuildError, match="points at"):
        build_status(described(status={"use_status_url": True}), "j1", url)
    with pytest.raises(RequestBuildError, match="points at"):
        build_errors_page(desc, url)


@pytest.mark.parametrize(
    "url",
    [
        "https://results.example.com/r?sig=abc",
        "http://8.8.8.8/r",
        "http://[2001:4860::8888]/r",
        # what DNS64 gives for an IPv4-only public host on an IPv6-only network
        "http://[64:ff9b::5db8:d822]/r",
        "http://[2002:5db8:d822::1]/r",
    ],
)
def test_a_url_on_a_public_address_passes(url: str) -> None:
    assert resolve_url(described(), url) == url


def test_the_base_urls_own_host_stays_allowed_on_any_port() -> None:
    desc = described("http://127.0.0.1:8000")
    assert resolve_url(desc, "/v1/jobs/j1") == "http://127.0.0.1:8000/v1/jobs/j1"
    assert resolve_url(desc, "http://127.0.0.1:9000/r") == "http://127.0.0.1:9000/r"
    with pytest.raises(RequestBuildError, match=re.escape("127.0.0.2")):
        resolve_url(desc, "http://127.0.0.2:8000/r")


def test_auth_extra_hosts_and_result_allowed_hosts_are_allowed() -> None:
    desc = described(
        auth={"extra_hosts": ["files.internal", "localhost"]},
        result={"allowed_hosts": ["10.0.0.5", "Store.LocalHost", "[::1]"]},
    )
    for url in (
        "http://localhost:9/r",
        "http://10.0.0.5/r",
        "http://10.0.0.5:8443/r",
        "http://store.localhost/r",
        "http://[::1]:81/r",
        "http://[0:0::1]/r",  # the same address written otherwise
    ):
        assert resolve_url(desc, url) == url
    for url in ("http://10.0.0.6/r", "http://a.store.localhost/r", "http://127.0.0.1/r"):
        with pytest.raises(RequestBuildError, match="points at"):
            resolve_url(desc, url)


def test_an_allowed_host_without_auth_extra_hosts_is_still_refused_elsewhere() -> None:
    """Allowing one internal host allows no other on the same network."""
    desc = described(result={"allowed_hosts": ["10.0.0.5"]})
    with pytest.raises(RequestBuildError, match=re.escape("10.0.0.6")):
        resolve_url(desc, "http://10.0.0.6/r")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://1.2.3.999/r", "Invalid IPv4 address"),
        ("http://files.example:abc/r", "Invalid port"),
        ("http://files.example:99999/r", "port 99999, outside 1-65535"),
        ("http://files.example:0/r", "port 0, outside 1-65535"),
        ("http://files.example/r\x7f", "control character"),
    ],
)
def test_a_url_httpx_would_refuse_is_refused_when_built(url: str, problem: str) -> None:
    with pytest.raises(RequestBuildError, match=problem):
        resolve_url(described(), url)


def test_a_huge_url_is_refused_without_being_repeated() -> None:
    huge = "http://" + "a" * 70000 + ".example/r"
    with pytest.raises(RequestBuildError) as caught:
        resolve_url(described(), huge)
    assert "70017 characters" in str(caught.value) and len(str(caught.value)) < 200
    at_limit = "https://results.example.com/" + "r" * (MAX_URL_CHARS - 28)
    assert len(at_limit) == MAX_URL_CHARS and resolve_url(described(), at_limit) == at_limit
    with pytest.raises(RequestBuildError, match="characters long"):
        resolve_url(described(), at_limit + "r")


def test_a_job_id_too_long_for_any_url_is_refused_when_built() -> None:
    with pytest.raises(RequestBuildError, match=r"the status URL is \d+ characters long"):
        build_status(described(), "j" * MAX_URL_CHARS)


def _result_request(desc: ProviderDescription) -> HttpRequest:
    return HttpRequest(
        action="result",
        method="GET",
        url=desc.base_url + "/results/j1",
        headers={"Authorization": "Bearer k"},
        timeout=1.0,
        secret_headers=frozenset({"Authorization"}),
    )


@pytest.mark.parametrize(
    ("location", "problem"),
    [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://localhost:5432/", "loopback name"),
        ("http://1.2.3.999/r", "Invalid IPv4 address"),
        ("https://files.example:99999/r", "cannot be parsed"),
        ("https://files.example/" + "r" * MAX_URL_CHARS, "characters long"),
    ],
)
def test_a_redirect_the_sender_would_refuse_or_to_an_internal_host_is_refused(
    location: str, problem: str
) -> None:
    desc = described()
    with pytest.raises(RequestBuildError, match=problem):
        build_redirect(desc, _result_request(desc), location)


def test_a_redirect_to_an_allowed_internal_host_is_followed_without_the_credential() -> None:
    desc = described(result={"allowed_hosts": ["10.0.0.5"]})
    hop = build_redirect(desc, _result_request(desc), "http://10.0.0.5/blob?sig=x")
    assert hop.url == "http://10.0.0.5/blob?sig=x" and "Authorization" not in hop.headers


@pytest.mark.parametrize(
    ("url", "credential"),
    [
        ("https://api.acme.test/v1/jobs/j1", True),
        ("https://API.acme.test:443/v1/jobs/j1", True),  # the base URL's origin spelt out
        ("https://api.acme.test:8443/v1/jobs/j1", False),  # its host, another port
        ("http://api.acme.test/v1/jobs/j1", False),  # its host, another scheme
        ("https://files.acme.test/r", True),  # an extra host, bare: https on 443
        ("https://files.acme.test:443/r", True),
        ("https://files.acme.test:8443/r", False),
        ("http://files.acme.test/r", False),
        ("http://files.acme.test:443/r", False),
        ("https://blobs.acme.test:9443/r", True),  # `host:port`: that port
        ("https://blobs.acme.test/r", False),
    ],
)
def test_the_credential_goes_to_the_origins_named_never_to_a_host_on_another_port(
    url: str, credential: bool
) -> None:
    """A status URL and a redirect's hop carry the credential only on the base URL's
    origin or an https `auth.extra_hosts` origin (before: any port of an extra host)."""
    extra = ["files.acme.test", "blobs.acme.test:9443"]
    desc = described(auth={"extra_hosts": extra}, status={"use_status_url": True})
    assert ("Authorization" in build_status(desc, "j1", url).headers) is credential
    hop = build_redirect(desc, _result_request(desc), url)
    assert ("Authorization" in hop.headers) is credential


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("http://files.internal", "a host or host:port is expected"),
        ("files.internal/x", "a host or host:port is expected"),
        ("user@files.internal", "a host or host:port is expected"),
        ("files.internal:0", "a port is a number 1-65535"),
        ("files.internal:65536", "a port is a number 1-65535"),
        ("files.internal:", "a port is a number 1-65535"),
        ("[::1]:x", "a port is a number 1-65535"),
        ("1.2.3.999", "not a host name or IP address"),
        ("1.2.3.999:80", "not a host name or IP address"),
        ("", "must be a list of non-empty strings"),
        (5, "must be a list of non-empty strings"),
    ],
)
def test_a_bad_allowed_hosts_entry_is_a_load_error(entry: Any, problem: str) -> None:
    with pytest.raises(ConfigError, match=rf"p\.result\.allowed_hosts: .*{re.escape(problem)}"):
        described(result={"allowed_hosts": [entry]})


def test_a_bad_extra_hosts_entry_is_a_load_error() -> None:
    """Before, any text was kept: `https://files.internal` matched no host, silently."""
    with pytest.raises(ConfigError, match=r"p\.auth\.extra_hosts: .*host:port is expected"):
        described(auth={"extra_hosts": ["https://files.internal"]})


def test_an_entry_with_a_port_allows_its_internal_host_on_that_port_alone() -> None:
    """`host:port` names one server; a bare entry still names the host on any port."""
    desc = described(result={"allowed_hosts": ["10.0.0.5:9000", "[::1]:8443", "Store.Internal:81"]})
    assert {"10.0.0.5:9000", "[::1]:8443", "store.internal:81"} <= configured_hosts(desc)
    for url in ("http://10.0.0.5:9000/r", "https://[::1]:8443/r"):
        assert resolve_url(desc, url) == url
    for url in ("http://10.0.0.5/r", "http://10.0.0.5:9001/r", "https://[::1]/r"):
        with pytest.raises(RequestBuildError, match="points at"):
            resolve_url(desc, url)


def test_allowed_hosts_must_be_a_list() -> None:
    with pytest.raises(ConfigError, match=r"result\.allowed_hosts: must be a list"):
        described(result={"allowed_hosts": "10.0.0.5"})


def test_hosts_the_operator_named_match_as_connections_name_them() -> None:
    """An international name is sent in its `xn--` form: a name the operator wrote
    in Unicode in auth.extra_hosts must match that form (before: never matched,
    and the connection guard refused a host the operator trusted)."""
    desc = described(auth={"extra_hosts": ["Bücher.example", "[::1]"]})
    assert {"xn--bcher-kva.example", "::1"} <= configured_hosts(desc)


@pytest.mark.parametrize(
    "url", ["https://xn--sf-test/x", "https://xn--/x", "http://xn--a.example/r"]
)
def test_a_url_whose_host_is_no_valid_idn_is_refused_not_raised(url: str) -> None:
    """An A-label that does not decode raised idna's error past the step (a page's
    next URL, a status's result link): retried forever, never told to a human."""
    with pytest.raises(RequestBuildError, match="cannot be sent"):
        resolve_url(described(), url)
