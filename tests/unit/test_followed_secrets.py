"""Secret files read again when they change: a short-lived token without a restart.

The clock a followed secret looks at is moved by hand (`shared.secret.clock`):
no test waits for the recheck interval to pass.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from shared import secret as secrets
from shared.providers import ConfigError, parse_providers
from shared.providers.requests import build_status
from shared.secret import RECHECK_SECONDS, FollowedSecret
from shared.signatures import sign_standard_webhooks

FIRST, SECOND = "tok-first-DO-NOT-PRINT", "tok-second-DO-NOT-PRINT"

BASE: dict[str, Any] = {
    "base_url": "https://api.acme.test",
    "create": {"path": "/v1/jobs", "idempotency": "header", "job_id": "/id"},
    "status": {"path": "/v1/jobs/{job_id}", "state": "/status", "state_map": {"ok": "succeeded"}},
    "result": {"source": "none"},
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    monkeypatch.setattr(secrets, "clock", moved)
    return moved


def _rewrite(file: Path, text: str) -> None:
    """A new version, told from the last even within one timestamp tick."""
    file.write_text(text)
    stat = file.stat()
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def _auth_provider(file: Path) -> Any:
    table = {**BASE, "auth": {"secret_file": str(file)}}
    return parse_providers({"providers": {"acme": table}}, "config.toml", {})["acme"]


def test_a_rewritten_token_is_used_once_the_recheck_interval_has_passed(
    tmp_path: Path, clock: Clock
) -> None:
    file = tmp_path / "token"
    file.write_text(FIRST + "\n")
    desc = _auth_provider(file)
    assert desc.auth.header_value() == f"Bearer {FIRST}"
    _rewrite(file, SECOND + "\n")
    # within the interval the file is not looked at
    clock.now += RECHECK_SECONDS / 2
    assert desc.auth.header_value() == f"Bearer {FIRST}"
    clock.now += RECHECK_SECONDS
    assert desc.auth.header_value() == f"Bearer {SECOND}"
    # what the reconciler sends: the request is built with the token of the moment
    assert build_status(desc, "job_1").headers["Authorization"] == f"Bearer {SECOND}"


def test_a_token_replaced_by_a_rename_is_used(tmp_path: Path, clock: Clock) -> None:
    """How a refresher writes safely: a new file moved over the old one."""
    file = tmp_path / "token"
    file.write_text(FIRST)
    followed = FollowedSecret(file)
    fresh = tmp_path / "token.new"
    fresh.write_text(SECOND)
    fresh.replace(file)
    clock.now += RECHECK_SECONDS
    assert followed.reveal() == SECOND


@pytest.mark.parametrize(
    ("version", "reason"),
    [
        ("\n", "is empty"),
        (b"\xff\xfe", "is not UTF-8 text"),
        ("tok\r\nX-Injected: 1", "line break or another control character"),
    ],
    ids=["empty", "not-utf8", "header-injection"],
)
def test_a_version_that_cannot_be_used_leaves_the_last_good_token(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture, version: Any, reason: str
) -> None:
    file = tmp_path / "token"
    file.write_text(FIRST)
    desc = _auth_provider(file)
    if isinstance(version, bytes):
        file.write_bytes(version)
    else:
        _rewrite(file, version)
    clock.now += RECHECK_SECONDS
    with caplog.at_level(logging.WARNING, logger="jobwarden.secrets"):
        assert desc.auth.header_value() == f"Bearer {FIRST}"
    [record] = caplog.records
    assert record.getMessage() == "secret file changed but cannot be used; the previous value stays"
    ctx = record.__dict__["ctx"]
    assert ctx["source"] == f"file:{file}" and reason in ctx["reason"]
    assert FIRST not in str(ctx) and "Injected" not in str(ctx)
    # it is not read again until it changes again; then the good version is used
    clock.now += RECHECK_SECONDS
    assert desc.auth.header_value() == f"Bearer {FIRST}"
    assert len(caplog.records) == 1
    _rewrite(file, SECOND)
    clock.now += RECHECK_SECONDS
    assert desc.auth.header_value() == f"Bearer {SECOND}"


def test_a_version_unreadable_until_its_permissions_are_mended_is_then_used(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresher running as root wrote the new token 0600 root: the reconciler
    cannot read it, and the mend, `chown jobwarden`, leaves size, mtime and inode
    as they were. Before, that version was marked seen and never read again: the
    expiring token stayed in use until a restart."""
    file = tmp_path / "token"
    file.write_text(FIRST)
    followed = FollowedSecret(file)
    fresh = tmp_path / "token.new"
    fresh.write_text(SECOND)
    fresh.replace(file)

    def unreadable(path: Path) -> str:
        raise secrets.SecretError(f"secret file {path} cannot be read (Permission denied)")

    with monkeypatch.context() as patched:  # tests run as root, whom no mode stops
        patched.setattr(secrets, "_read_secret_file", unreadable)
        clock.now += RECHECK_SECONDS
        with caplog.at_level(logging.WARNING, logger="jobwarden.secrets"):
            assert followed.reveal() == FIRST
            clock.now += RECHECK_SECONDS
            assert followed.reveal() == FIRST
    assert len(caplog.records) == 1  # one warning for the version, not one a look
    # the chown: nothing the stamp holds changes
    clock.now += RECHECK_SECONDS
    assert followed.reveal() == SECOND


def test_a_file_gone_for_a_moment_leaves_the_last_token(tmp_path: Path, clock: Clock) -> None:
    file = tmp_path / "token"
    file.write_text(FIRST)
    followed = FollowedSecret(file)
    file.unlink()
    clock.now += RECHECK_SECONDS
    assert followed.reveal() == FIRST
    file.write_text(SECOND)
    clock.now += RECHECK_SECONDS
    assert followed.reveal() == SECOND


def test_a_token_that_no_header_can_carry_is_refused_at_load(tmp_path: Path) -> None:
    file = tmp_path / "token"
    file.write_text("tok\nX-Injected: 1")
    with pytest.raises(ConfigError) as caught:
        _auth_provider(file)
    assert str(caught.value) == (
        f"config.toml: providers.acme.auth.secret_file: {file}: the credential holds a line "
        "break or another control character"
    )


def test_a_rotated_webhook_secret_must_pass_its_schemes_check(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """A Standard Webhooks secret rewritten without its whsec_ form is not taken:
    deliveries keep verifying with the last good one."""
    good, rotated = "whsec_" + "Zmlyc3Qtc2VjcmV0LWtleQ==", "whsec_" + "c2Vjb25kLXNlY3JldC1rZXk="
    file = tmp_path / "hook.key"
    file.write_text(good)
    webhooks = {"scheme": "standard_webhooks", "secrets_file": str(file), "job_id": "/id"}
    table = {**BASE, "webhooks": webhooks}
    desc = parse_providers({"providers": {"acme": table}}, "config.toml", {})["acme"]
    assert desc.webhooks is not None
    [followed] = desc.webhooks.secrets
    _rewrite(file, "not-a-standard-webhooks-secret")
    clock.now += RECHECK_SECONDS
    with caplog.at_level(logging.WARNING, logger="jobwarden.secrets"):
        assert followed.reveal() == good
    assert "whsec_" in caplog.records[0].__dict__["ctx"]["reason"]
    _rewrite(file, rotated)
    clock.now += RECHECK_SECONDS
    assert followed.reveal() == rotated
    # and the value is one a signer can use
    assert sign_standard_webhooks(rotated, "msg_1", 1, b"{}").startswith("v1,")


def test_a_version_still_being_written_while_read_is_not_taken(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresher writing in place (`print-access-token > token`) in more than
    one write: a read between two of them gets a token cut short, which a create
    would send (a 401 there fails the operation for good). The file changed
    under the read, so what it got waits for the next look."""
    file = tmp_path / "token"
    file.write_text(FIRST)
    followed = FollowedSecret(file)
    _rewrite(file, SECOND[:5])  # the refresher's first write
    read = secrets._read_secret_file

    def read_as_the_refresher_writes_on(path: Path) -> str:
        got = read(path)
        _rewrite(file, SECOND)  # its next write lands after our read
        return got

    monkeypatch.setattr(secrets, "_read_secret_file", read_as_the_refresher_writes_on)
    clock.now += RECHECK_SECONDS
    assert followed.reveal() == FIRST
    monkeypatch.setattr(secrets, "_read_secret_file", read)
    clock.now += RECHECK_SECONDS
    assert followed.reveal() == SECOND


def test_a_followed_secret_compares_with_its_value_of_the_moment(
    tmp_path: Path, clock: Clock
) -> None:
    """`matches` (static shared-secret headers) follows the file as `reveal` does."""
    file = tmp_path / "token"
    file.write_text(FIRST)
    followed = FollowedSecret(file)
    _rewrite(file, SECOND)
    clock.now += RECHECK_SECONDS
    assert followed.matches(SECOND) and not followed.matches(FIRST)


def test_a_callback_token_rotated_in_its_file_is_still_scrubbed_from_echoes(
    tmp_path: Path, clock: Clock
) -> None:
    """A job created before the rotation was given the old token in its callback
    URL, and the provider echoes that URL in its answers and deliveries: the old
    value must be scrubbed as the new one is, never stored in clear."""
    old, new = "cb_" + "a" * 40, "cb_" + "b" * 40
    file = tmp_path / "hook.token"
    file.write_text(old)
    webhooks = {
        "scheme": "static_header",
        "options": {"query": "token"},
        "secrets_file": str(file),
        "job_id": "/id",
    }
    table = {**BASE, "webhooks": webhooks}
    desc = parse_providers({"providers": {"acme": table}}, "config.toml", {})["acme"]
    assert desc.webhooks is not None and desc.webhooks.token_in_url
    _rewrite(file, new)
    clock.now += RECHECK_SECONDS
    echo = f'{{"webhook": "https://hooks.test/w?token={old}", "next": "{new}"}}'.encode()
    scrubbed = desc.webhooks.scrub_token(echo)
    assert old.encode() not in scrubbed and new.encode() not in scrubbed
    # what the reconciler scrubs an answer with holds both as well
    [followed] = desc.webhooks.secrets
    assert followed.values_held() == (new, old)
