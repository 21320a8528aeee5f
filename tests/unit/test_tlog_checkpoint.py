"""Checkpoints: one spelling, and real published ones verified end to end."""

from __future__ import annotations

import base64
from collections.abc import Sequence

import pytest

from shared.tlog import (
    MAX_SIZE,
    BadSignature,
    Checkpoint,
    CheckpointError,
    Signer,
    UnverifiedNote,
    Verifier,
    generate_key,
    inclusion_proof,
    leaf_hash,
    open_note,
    sign,
    stored_hash_index,
    stored_hashes,
    tree_hash,
    verify_inclusion,
)

ROOT = bytes(range(32))
ROOT_B64 = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

# sum.golang.org, the Go checksum database: its key is the one built into the go
# command (GOSUMDB's default). C2SP's tlog-checkpoint example is this checkpoint
# with the origin line renamed to example.com/behind-the-sofa; its signature
# verifies over the original origin, restored here.
SUMDB_VKEY = "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8"
SUMDB_NOTE = (
    "go.sum database tree\n"
    "20852163\n"
    "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    "\n"
    "— sum.golang.org Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9n"
    "To+zyWE+xeMcTOAYQ8=\n"
)

# A checkpoint of the Certificate Transparency log arche2025h1 (transparency.dev
# staging), signed by the log and by four witnesses, one line an RFC 6962 tree
# head signature (type 0x05). remora.n621.de's witness key is the one in
# transparency-dev/formats' note/note_cosigv1_test.go.
ARCHE_VKEY = (
    "arche2025h1.staging.ct.transparency.dev+ba2f06c0+AU0vHmlGCS/PdN8b2OaGmKprLI8HKM+dJ472xgFYh15f"
)
REMORA_VKEY = "remora.n621.de+da77ade7+BOvN63jn/bLvkieywe8R6UYAtVtNbZpXh34x7onlmtw2"
ARCHE_NOTE = (
    "arche2025h1.staging.ct.transparency.dev\n"
    "1432088532\n"
    "U7WM79jrzyhGZ5/GUBTpM7NzwdyfFx61t3RovgcC4Ro=\n"
    "\n"
    "— arche2025h1.staging.ct.transparency.dev zTM8sQAAAZ5W0WdjBAMARjBEAiBjW5IQf9pvsYLfQFX6hoGREPMH"
    "bdQ3urbllzalApkptQIgIpwtEroeW2BXaHAI4kJXFbon5Ch9MNL5zRNZ55lvGt0=\n"
    "— arche2025h1.staging.ct.transparency.dev ui8GwCF1+kWqZrxGdhj4aX3gcw7XUlXQQabg/27lefwhUkzbC3Ny"
    "gNI75MdhL1bfTW9g8Ei59RA23oHP7Ry1k3ZFWwQ=\n"
    "— transparency.dev/DEV:witness-little-garden 2AQqhwAAAABqEiEgzgFIqqhbUoDwjMWE6UP8nd8/KYTzwZ2rh"
    "IgcqoXHAwVkjZr4AscylP3v7sEodkRAErumC2q44vdgJY096st5BQ==\n"
    "— witness1.smartit.nu/witness1 pIyCDwAAAABqEiEghIp82KWebrw7/oHQwlTAm3g2RKS4+eebl8eO0WH+/iE"
    "cxZ75W3u5hNI7TOQtmJbqmNWVuE0tgh0XwzdZsDsUAQ==\n"
    "— remora.n621.de 2net5wAAAABqEiEgPlfF3V06o0Y+fHM+J5J9s27wgxxcOVSpZ/2g/KSiXCg9DEZI+aVCIobWX9sX"
    "Tynk5XeU/zZ0WBxtqB0DrAWfBw==\n"
    "— witness.stagemole.eu Z/euoAAAAABqEiEgw0i+7g2ENfDAWHmtRzCfKTHSDwYDJA2NmKeGi9Y8FtEyOUvVr+AJmIY"
    "/2TUFucgKi7lI7cUiOvKFYe/TmN9DAg==\n"
)


def test_text_and_parse_round_trip() -> None:
    checkpoint = Checkpoint("example.com/log", 42, ROOT, ("ext one", "ext+two"))
    assert checkpoint.text() == f"example.com/log\n42\n{ROOT_B64}\next one\next+two\n"
    assert Checkpoint.parse(checkpoint.text()) == checkpoint
    for size in (0, 1, MAX_SIZE):
        plain = Checkpoint("o", size, ROOT)
        assert Checkpoint.parse(plain.text()) == plain


def test_go_tree_note_vector() -> None:
    """golang.org/x/mod sumdb/tlog note_test.go: the checkpoint body Go's sumdb signs."""
    golden = "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n"
    checkpoint = Checkpoint("go.sum database tree", 123456789012, leaf_hash(b"hello world"))
    assert checkpoint.text() == golden
    assert Checkpoint.parse(golden) == checkpoint
    for bad in (
        "go.sum database tree\n0xabcdef\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n",
        "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBTOOBIG=\n",
    ):
        with pytest.raises(CheckpointError):
            Checkpoint.parse(bad)


def test_c2sp_example_text_parses() -> None:
    text = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    checkpoint = Checkpoint.parse(text)
    assert (checkpoint.origin, checkpoint.size, checkpoint.extensions) == (
        "example.com/behind-the-sofa",
        20852163,
        (),
    )
    assert checkpoint.text() == text


NOT_CHECKPOINTS = {
    "no final newline": f"o\n1\n{ROOT_B64}",
    "two lines": "o\n1\n",
    "empty": "",
    "empty origin": f"\n1\n{ROOT_B64}\n",
    "empty size": f"o\n\n{ROOT_B64}\n",
    "leading zero": f"o\n012\n{ROOT_B64}\n",
    "plus sign": f"o\n+12\n{ROOT_B64}\n",
    "minus sign": f"o\n-1\n{ROOT_B64}\n",
    "space": f"o\n 12\n{ROOT_B64}\n",
    "underscore": f"o\n1_000\n{ROOT_B64}\n",
    "arabic-indic digits": f"o\n\u0661\u0662\n{ROOT_B64}\n",
    "2**64": f"o\n18446744073709551616\n{ROOT_B64}\n",
    "21 digits": f"o\n100000000000000000000\n{ROOT_B64}\n",
    "31-byte root": f"o\n1\n{base64.b64encode(ROOT[:31]).decode()}\n",
    "33-byte root": f"o\n1\n{base64.b64encode(ROOT + b'x').decode()}\n",
    "hex root": f"o\n1\n{ROOT.hex()}\n",
    "url-safe root": "o\n1\n" + base64.urlsafe_b64encode(bytes([255] * 32)).decode() + "\n",
    "unpadded root": f"o\n1\n{ROOT_B64.rstrip('=')}\n",
    "non-canonical root": f"o\n1\n{ROOT_B64.replace('8=', '9=')}\n",
    "root and a space": f"o\n1\n{ROOT_B64} \n",
    "empty extension": f"o\n1\n{ROOT_B64}\n\n",
    "empty line between extensions": f"o\n1\n{ROOT_B64}\na\n\nb\n",
    "carriage returns": f"o\r\n1\r\n{ROOT_B64}\r\n",
    "control character in origin": f"o\x00\n1\n{ROOT_B64}\n",
    "tab in an extension": f"o\n1\n{ROOT_B64}\na\tb\n",
    "lone surrogate": f"o\ud800\n1\n{ROOT_B64}\n",
}


@pytest.mark.parametrize("text", NOT_CHECKPOINTS.values(), ids=NOT_CHECKPOINTS.keys())
def test_parse_is_strict(text: str) -> None:
    with pytest.raises(CheckpointError):
        Checkpoint.parse(text)


def test_non_canonical_root_is_the_same_bytes() -> None:
    """The refused spelling above is no typo: it decodes to the very same root."""
    assert base64.b64decode(ROOT_B64.replace("8=", "9=")) == ROOT


def test_unwritable_checkpoints_cannot_be_made() -> None:
    cases: list[tuple[str, object, object, object]] = [
        ("", 1, ROOT, ()),
        ("a\nb", 1, ROOT, ()),
        ("o", -1, ROOT, ()),
        ("o", MAX_SIZE + 1, ROOT, ()),
        ("o", True, ROOT, ()),
        ("o", 1.0, ROOT, ()),
        ("o", 1, ROOT[:31], ()),
        ("o", 1, ROOT_B64, ()),
        ("o", 1, ROOT, ["list"]),
        ("o", 1, ROOT, ("",)),
        ("o", 1, ROOT, ("two\nlines",)),
    ]
    for origin, size, root, extensions in cases:
        with pytest.raises(CheckpointError):
            Checkpoint(origin, size, root, extensions)  # type: ignore[arg-type]


# -- real checkpoints, end to end ------------------------------------------------


def test_sum_golang_org_checkpoint() -> None:
    sumdb = Verifier.from_key(SUMDB_VKEY)
    opened = open_note(SUMDB_NOTE, [sumdb])
    assert opened.verified == (sumdb,)
    checkpoint = Checkpoint.parse(opened.text)
    assert (checkpoint.origin, checkpoint.size) == ("go.sum database tree", 20852163)
    assert checkpoint.root_hash == base64.b64decode("CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")

    with pytest.raises(BadSignature):
        open_note(SUMDB_NOTE.replace("20852163", "20852164"), [sumdb])
    # As the spec prints it, under another name, the line is no longer sum.golang.org's.
    renamed = SUMDB_NOTE.replace("go.sum database tree", "example.com/behind-the-sofa")
    with pytest.raises(UnverifiedNote):
        open_note(renamed.replace("— sum.golang.org", "— example.com/behind-the-sofa"), [sumdb])


def test_witnessed_ct_checkpoint() -> None:
    log, remora = Verifier.from_key(ARCHE_VKEY), Verifier.from_key(REMORA_VKEY)
    opened = open_note(ARCHE_NOTE, [log, remora])
    assert [(s.verifier, s.timestamp) for s in opened.signatures] == [
        (log, None),
        (remora, 1779573024),
    ]
    # The tree head signature (type 0x05) and the three other witnesses are not ours to check.
    assert [s.name for s in opened.unverified] == [
        "arche2025h1.staging.ct.transparency.dev",
        "transparency.dev/DEV:witness-little-garden",
        "witness1.smartit.nu/witness1",
        "witness.stagemole.eu",
    ]
    checkpoint = Checkpoint.parse(opened.text)
    assert (checkpoint.origin, checkpoint.size) == (
        "arche2025h1.staging.ct.transparency.dev",
        1432088532,
    )
    # The witness alone vouches for the checkpoint too, and for nothing else.
    assert open_note(ARCHE_NOTE, [remora]).verified == (remora,)
    with pytest.raises(BadSignature):
        open_note(ARCHE_NOTE.replace("1432088532", "1432088533"), [remora])


def test_a_signed_checkpoint_anchors_inclusion_proofs() -> None:
    """The whole path the audit command takes: tree, checkpoint, note, and back."""
    stored: dict[int, bytes] = {}

    def read(indexes: Sequence[int]) -> list[bytes]:
        return [stored[i] for i in indexes]

    records = [b"record %d" % i for i in range(10)]
    for n, record in enumerate(records):
        first = stored_hash_index(0, n)
        for offset, value in enumerate(stored_hashes(n, leaf_hash(record), read)):
            stored[first + offset] = value
    skey, vkey = generate_key("example.com/log")
    written = Checkpoint("example.com/log", len(records), tree_hash(len(records), read))
    note = sign(written.text(), [Signer.from_key(skey)])

    checkpoint = Checkpoint.parse(open_note(note, [Verifier.from_key(vkey)]).text)
    assert checkpoint == written
    for index, record in enumerate(records):
        proof = inclusion_proof(index, checkpoint.size, read)
        verify_inclusion(index, checkpoint.size, leaf_hash(record), proof, checkpoint.root_hash)
