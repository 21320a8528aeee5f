"""The `hmac` family's `construction = "secret_suffix"`: the plain digest of the
signed content followed by the secret, no HMAC. Cloudinary signs its notifications
so: X-Cld-Signature = hex SHA-1 (or SHA-256) of body + X-Cld-Timestamp +
api_secret, as its SDKs' verifyNotificationSignature computes it. Before, no
scheme computed it (`hmac` with sha1 over "{body}{timestamp}" is a keyed HMAC,
another value): such a notification could not be verified, and was refused
(`test_unseen_round57b.py::test_cloudinary_its_signed_notification_wakes_the_asset`).

The vectors are computed here with hashlib alone, as Cloudinary's signer does,
never through the library."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from shared.providers import parse_providers
from shared.providers.guarantees import describe_guarantees
from shared.signatures import SignatureError, check_options, sign, verify

SECRET = "cld-api-secret-0123456789abcdef"
TIMESTAMP = 1_765_015_200
NOW = TIMESTAMP + 30.0
BODY = b'{"notification_type":"eager","public_id":"sample","batch_id":"b001"}'
CLOUDINARY = {
    "signature_header": "X-Cld-Signature",
    "timestamp_header": "X-Cld-Timestamp",
    "signed_content": "{body}{timestamp}",
    "algorithm": "sha1",
    "construction": "secret_suffix",
}


def cloudinary_signature(body: bytes, ts: int, secret: str, algorithm: str = "sha1") -> str:
    """Cloudinary's: hex digest of body + timestamp + api_secret."""
    return hashlib.new(algorithm, body + str(ts).encode() + secret.encode()).hexdigest()


def headers(signature: str, ts: int = TIMESTAMP) -> dict[str, str]:
    return {"X-Cld-Signature": signature, "X-Cld-Timestamp": str(ts)}


def refused(options: dict[str, object], hdrs: dict[str, str], **kw: object) -> str:
    with pytest.raises(SignatureError) as info:
        verify(  # type: ignore[arg-type]
            "hmac",
            options,
            hdrs,
            kw.pop("body", BODY),
            kw.pop("secrets", [SECRET]),
            kw.pop("now", NOW),
            **kw,
        )
    return info.value.reason


@pytest.mark.parametrize("algorithm", ["sha1", "sha256"])
def test_a_cloudinary_signature_verifies_with_its_timestamp(algorithm: str) -> None:
    options = {**CLOUDINARY, "algorithm": algorithm}
    sig = cloudinary_signature(BODY, TIMESTAMP, SECRET, algorithm)
    result = verify("hmac", options, headers(sig), BODY, ["old-secret", SECRET], NOW)
    assert result.timestamp == TIMESTAMP
    # the sender side agrees with the independent computation
    assert sign("hmac", options, SECRET, BODY, timestamp=TIMESTAMP) == sig


def test_the_docs_vector_verifies() -> None:
    """A fixed vector, written out: SHA-1 of the exact bytes Cloudinary digests."""
    body, ts, secret = b"{}", 1_315_060_076, "abcd"
    sig = hashlib.sha1(b"{}1315060076abcd").hexdigest()
    options = {**CLOUDINARY}
    assert verify("hmac", options, headers(sig, ts), body, [secret], ts + 1.0).timestamp == ts


def test_a_wrong_secret_another_body_or_an_hmac_are_refused() -> None:
    sig = cloudinary_signature(BODY, TIMESTAMP, SECRET)
    assert refused(CLOUDINARY, headers(sig), secrets=["another"]) == "bad_signature"
    assert refused(CLOUDINARY, headers(sig), body=BODY + b" ") == "bad_signature"
    assert refused(CLOUDINARY, headers(sig, TIMESTAMP + 1), now=NOW + 1) == "bad_signature"
    keyed = hmac.new(SECRET.encode(), BODY + str(TIMESTAMP).encode(), hashlib.sha1).hexdigest()
    assert refused(CLOUDINARY, headers(keyed)) == "bad_signature"
    # and the default construction refuses Cloudinary's digest
    hmac_options = {k: v for k, v in CLOUDINARY.items() if k != "construction"}
    assert refused(hmac_options, headers(sig)) == "bad_signature"


def test_the_replay_window_holds() -> None:
    sig = cloudinary_signature(BODY, TIMESTAMP, SECRET)
    assert refused(CLOUDINARY, headers(sig), now=TIMESTAMP + 301.0) == "stale_timestamp"
    assert refused(CLOUDINARY, headers(sig), now=TIMESTAMP - 301.0) == "future_timestamp"
    longer = verify(
        "hmac", CLOUDINARY, headers(sig), BODY, [SECRET], TIMESTAMP + 7000.0, tolerance_seconds=7200
    )
    assert longer.timestamp == TIMESTAMP
    assert refused(CLOUDINARY, {"X-Cld-Signature": sig}) == "missing_header"


def test_an_unknown_construction_is_refused_at_load() -> None:
    with pytest.raises(ValueError, match="construction"):
        check_options("hmac", {**CLOUDINARY, "construction": "prefix"})


def test_providers_check_says_the_signature_is_no_hmac() -> None:
    """`providers check` tells the operator what such a signature is worth: a
    plain digest with the secret appended, weaker than an HMAC; before, it read
    "hmac signatures" as for any HMAC sender."""
    table = {
        "base_url": "https://api.cloudinary.example.test",
        "create": {"path": "/explicit", "idempotency": "none", "job_id": "/public_id"},
        "status": {
            "path": "/resources/{+job_id}",
            "state": "/type",
            "state_map": {"upload": "running"},
        },
        "result": {"source": "none"},
        "webhooks": {
            "scheme": "hmac",
            "options": CLOUDINARY,
            "secrets_env": "CLD_SECRET",
            "thin": True,
            "job_id": "/public_id",
        },
    }
    desc = parse_providers({"providers": {"c": table}}, "t.toml", {"CLD_SECRET": SECRET})["c"]
    (_, signed, why) = describe_guarantees(desc)[-2]
    assert signed and "secret_suffix: a plain digest of the content then the secret" in why, why
