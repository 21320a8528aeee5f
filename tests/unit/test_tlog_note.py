"""Signed notes: Go's sumdb/note vectors byte for byte, the C2SP example, every way to break one."""

from __future__ import annotations

import base64
import re

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from shared.tlog import (
    ALG_COSIGNATURE_V1,
    ALG_ED25519,
    BadSignature,
    Checkpoint,
    CosignatureSigner,
    NoteError,
    NoteSignature,
    Signer,
    UnverifiedNote,
    Verifier,
    compute_key_id,
    cosign,
    generate_cosignature_key,
    generate_key,
    note_text,
    open_note,
    sign,
)

# golang.org/x/mod sumdb/note/note_test.go and example_test.go.
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
# Go's example generates EnochRoot's key from a reader of zero bytes: an all-zero seed.
ENOCH_SKEY = "PRIVATE+KEY+EnochRoot+af0cfe78+" + base64.b64encode(b"\x01" + bytes(32)).decode()
TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgK"
    "vqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTG"
    "wnWLox33WWd1RvMc+QQ=\n"
)
PETER_NOTE = TEXT + "\n" + PETER_SIG

# c2sp.org/signed-note, "Verifier keys", Example.
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = (
    "This is an example message.\n\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3m"
    "FXmRKuwHjG1Yu72IneyaQM=\n"
)

CHECKPOINT_TEXT = Checkpoint("example.com/log", 7, bytes(range(32))).text()


@pytest.fixture
def peter() -> Verifier:
    return Verifier.from_key(PETER_VKEY)


@pytest.fixture
def enoch() -> Verifier:
    return Verifier.from_key(ENOCH_VKEY)


def _with_sig(signature: NoteSignature, note: str = PETER_NOTE) -> str:
    return note + signature.line()


# -- Go's vectors --------------------------------------------------------------


def test_sign_reproduces_go() -> None:
    signer = Signer.from_key(PETER_SKEY)
    assert (signer.name, signer.key_id, signer.verifier_key) == (
        "PeterNeumann",
        0xC74F20A3,
        PETER_VKEY,
    )
    assert sign(TEXT, [signer]) == PETER_NOTE


def test_second_signature_reproduces_go_example() -> None:
    enoch = Signer.from_key(ENOCH_SKEY)
    assert enoch.verifier_key == ENOCH_VKEY
    assert sign(TEXT, [Signer.from_key(PETER_SKEY), enoch]) == TEXT + "\n" + PETER_SIG + ENOCH_SIG


def test_open_reproduces_go(peter: Verifier, enoch: Verifier) -> None:
    both = TEXT + "\n" + PETER_SIG + ENOCH_SIG

    opened = open_note(both, [peter])
    assert opened.text == TEXT
    assert opened.verified == (peter,)
    assert [s.timestamp for s in opened.signatures] == [None]
    assert [(s.name, s.key_id) for s in opened.unverified] == [("EnochRoot", 0xAF0CFE78)]
    assert [s.line() for s in opened.unverified] == [ENOCH_SIG]

    opened = open_note(both, [peter, enoch])
    assert (opened.verified, opened.unverified) == ((peter, enoch), ())

    with pytest.raises(UnverifiedNote, match="no signature by a known key"):
        open_note(both, [])

    # Repeats: one known key's line is checked once, identical unknown lines kept once.
    bent_enoch = ENOCH_SIG[:60] + "ABCD" + ENOCH_SIG[60:]
    opened = open_note(TEXT + "\n" + PETER_SIG * 2 + ENOCH_SIG * 2 + bent_enoch, [peter])
    assert opened.verified == (peter,)
    assert [s.line() for s in opened.unverified] == [ENOCH_SIG, bent_enoch]


def test_c2sp_example_verifies() -> None:
    verifier = Verifier.from_key(C2SP_VKEY)
    assert (verifier.name, verifier.key_id, verifier.algorithm) == (
        "example.com/foo",
        0x530D903A,
        ALG_ED25519,
    )
    assert verifier.public_key.hex() == (
        "e932791ae6e7a840a46164c904786426d5e7821dd8b29a00d61cae72afdd4da4"
    )
    assert open_note(C2SP_NOTE, [verifier]).text == "This is an example message.\n"


# -- round trips and the spec's rules ------------------------------------------


def test_generated_keys_round_trip() -> None:
    skey, vkey = generate_key("example.com/log")
    signer, verifier = Signer.from_key(skey), Verifier.from_key(vkey)
    assert signer.verifier == verifier
    assert verifier.vkey == vkey
    assert verifier.key_id == compute_key_id("example.com/log", ALG_ED25519, verifier.public_key)
    opened = open_note(sign("hello\n\nworld\n", [signer]), [verifier])
    assert opened.text == "hello\n\nworld\n"  # the text ends at the last blank line
    assert opened.verified == (verifier,)


def test_a_known_key_with_a_bad_signature_refuses_the_note(peter: Verifier) -> None:
    bent = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(BadSignature, match="invalid signature for key PeterNeumann\\+c74f20a3"):
        open_note(TEXT + "\n" + bent, [peter])
    # Even next to a good one.
    with pytest.raises(BadSignature):
        open_note(TEXT + "\n" + ENOCH_SIG + bent, [peter, Verifier.from_key(ENOCH_VKEY)])


def test_unknown_keys_are_ignored(peter: Verifier) -> None:
    stranger = Signer.from_key(generate_key("PeterNeumann")[0])  # same name, another key
    note = sign(TEXT, [stranger, Signer.from_key(PETER_SKEY)])
    opened = open_note(note, [peter])
    assert opened.verified == (peter,)
    assert [s.name for s in opened.unverified] == ["PeterNeumann"]
    with pytest.raises(UnverifiedNote):
        open_note(sign(TEXT, [stranger]), [peter])


def _fully_verified(note: bytes, verifiers: list[Verifier]) -> bool:
    try:
        return len(open_note(note, verifiers).verified) == len(verifiers)
    except NoteError:
        return False


def test_every_byte_change_is_refused(peter: Verifier) -> None:
    """Each change refuses the note, or (in a signature line) costs that key its signature."""
    witness = CosignatureSigner.from_key(generate_cosignature_key("witness.example")[0])
    log = Signer.from_key(generate_key("example.com/log")[0])
    cosigned = cosign(sign(CHECKPOINT_TEXT, [log]), [witness], timestamp=1_700_000_000)
    for note, verifiers in [
        (PETER_NOTE, [peter]),
        (cosigned, [log.verifier, witness.verifier]),
    ]:
        original = note.encode("utf-8")
        assert _fully_verified(original, verifiers)
        for i in range(len(original)):
            for mask in (0x01, 0x20, 0x80):
                bent = bytearray(original)
                bent[i] ^= mask
                assert not _fully_verified(bytes(bent), verifiers), (i, mask)
        with pytest.raises(NoteError):  # the text itself is covered by every signature
            open_note(note.replace("\n", "\n ", 1), verifiers)


def test_signature_base64_must_be_canonical(peter: Verifier) -> None:
    # 68 bytes leave 2 spare bits in the last character: 'M' and 'N' decode alike.
    assert PETER_SIG.endswith("AM=\n")
    respelled = TEXT + "\n" + PETER_SIG.replace("AM=\n", "AN=\n")
    assert base64.b64decode(respelled.split()[-1]) == base64.b64decode(PETER_SIG.split()[-1])
    with pytest.raises(NoteError, match="not canonical base64"):
        open_note(respelled, [peter])


MALFORMED = [
    ("no signatures", TEXT),
    ("blank line, no signatures", TEXT + "\n"),
    ("unterminated signature line", TEXT + "\n" + PETER_SIG[:-1]),
    ("control character", "\x01" + PETER_NOTE),
    ("tab", PETER_NOTE.replace("If you", "If\tyou")),
    ("carriage return", PETER_NOTE.replace("\n", "\r\n")),
    ("lone surrogate", "\ud800" + PETER_NOTE),
    ("space in the key name", TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Peter Neumann")),
    ("plus in the key name", TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Peter+Neumann")),
    ("empty key name", TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "")),
    ("hyphen for the dash", TEXT + "\n" + PETER_SIG.replace("—", "-")),
    ("no space after the dash", TEXT + "\n" + PETER_SIG.replace("— ", "—")),
    ("two spaces before the signature", TEXT + "\n" + PETER_SIG.replace(" x08go", "  x08go")),
    ("line after the signatures", PETER_NOTE + "Unexpected line.\n"),
    ("trailing blank line", PETER_NOTE + "\n"),
    ("signature of four bytes", TEXT + "\n— PeterNeumann x08gow==\n"),
    ("not base64", TEXT + "\n— PeterNeumann x08go/ZJkuBS9UG*\n"),
    ("101 signature lines", TEXT + "\n" + PETER_SIG * 101),
]


@pytest.mark.parametrize(("why", "note"), MALFORMED, ids=[why for why, _ in MALFORMED])
def test_malformed_notes_are_refused(why: str, note: str, peter: Verifier) -> None:
    with pytest.raises(NoteError) as caught:
        open_note(note, [peter])
    assert not isinstance(caught.value, UnverifiedNote | BadSignature), why


@pytest.mark.parametrize(("why", "note"), MALFORMED, ids=[why for why, _ in MALFORMED])
def test_the_text_of_a_malformed_note_is_refused_too(why: str, note: str) -> None:
    """note_text reads a note as open_note does, with no key to check it by."""
    with pytest.raises(NoteError):
        note_text(note)


def test_the_text_of_a_note_is_what_its_signatures_sign(peter: Verifier) -> None:
    stranger = Signer.from_key(generate_key("Stranger")[0])
    assert note_text(PETER_NOTE) == TEXT == open_note(PETER_NOTE, [peter]).text
    assert note_text(sign(TEXT, [stranger])) == TEXT  # a key nobody knows: still its text


def test_invalid_utf8_bytes_are_refused(peter: Verifier) -> None:
    with pytest.raises(NoteError, match="not valid UTF-8"):
        open_note(b"\xff" + PETER_NOTE.encode(), [peter])


def test_up_to_100_signature_lines_are_read(peter: Verifier) -> None:
    assert open_note(TEXT + "\n" + PETER_SIG * 100, [peter]).verified == (peter,)


def test_sign_refuses_what_open_would(peter: Verifier) -> None:
    signer = Signer.from_key(PETER_SKEY)
    for text, message in [
        ("abc", "must end with a newline"),
        ("a\x00b\n", "control character"),
        ("a\rb\n", "control character"),
        ("\udc80\n", "not valid Unicode"),
    ]:
        with pytest.raises(NoteError, match=message):
            sign(text, [signer])
    with pytest.raises(NoteError, match="at least one signer"):
        sign(TEXT, [])


def test_verifiers_that_collide_are_refused(peter: Verifier) -> None:
    assert open_note(PETER_NOTE, [peter, Verifier.from_key(PETER_VKEY)]).verified == (peter,)
    impostor = Verifier.from_key(generate_key("PeterNeumann")[1])
    object.__setattr__(impostor, "key_id", peter.key_id)  # as a 32-bit key id collision would
    with pytest.raises(NoteError, match="two different verifiers share the key"):
        open_note(PETER_NOTE, [peter, impostor])
    # A collision among keys the note does not use is harmless.
    enoch = Verifier.from_key(ENOCH_VKEY)
    twin = Verifier.from_key(generate_key("EnochRoot")[1])
    object.__setattr__(twin, "key_id", enoch.key_id)
    assert open_note(PETER_NOTE, [peter, enoch, twin]).verified == (peter,)


# -- keys ------------------------------------------------------------------------


def test_verifier_key_manglings_are_refused() -> None:
    """Go's TestNewVerifier: every proper substring and every one-byte increment fails."""
    for i in range(len(PETER_VKEY) + 1):
        for j in range(i + 1, len(PETER_VKEY) + 1):
            if (i, j) != (0, len(PETER_VKEY)):
                with pytest.raises(NoteError):
                    Verifier.from_key(PETER_VKEY[i:j])
    for i in range(len(PETER_VKEY)):
        with pytest.raises(NoteError):
            Verifier.from_key(PETER_VKEY[:i] + chr(ord(PETER_VKEY[i]) + 1) + PETER_VKEY[i + 1 :])
    # Go's hand-made two, key ids fixed up: a longer key (not canonical base64 either), and an
    # unknown algorithm.
    with pytest.raises(NoteError):
        Verifier.from_key(
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY=="
        )
    with pytest.raises(NoteError, match="unknown signature algorithm 0x65"):
        Verifier.from_key("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW")


def _secret_fragments(skey: str) -> set[str]:
    material = skey.rsplit("+", 1)[1]
    return {material[i : i + 8] for i in range(len(material) - 7)}


def test_signer_key_manglings_are_refused_without_echoing_the_key() -> None:
    """Go's TestNewSigner, plus: no error message shows any of the key material."""
    fragments = _secret_fragments(PETER_SKEY)

    def refused(skey: str) -> None:
        with pytest.raises(NoteError) as caught:
            Signer.from_key(skey)
        assert not any(f in str(caught.value) for f in fragments), str(caught.value)

    for i in range(len(PETER_SKEY) + 1):
        for j in range(i + 1, len(PETER_SKEY) + 1):
            if (i, j) != (0, len(PETER_SKEY)):
                refused(PETER_SKEY[i:j])
    for i in range(len(PETER_SKEY)):
        refused(PETER_SKEY[:i] + chr(ord(PETER_SKEY[i]) + 1) + PETER_SKEY[i + 1 :])


def test_key_errors_say_what_is_wrong() -> None:
    cases = [
        (Verifier.from_key, PETER_SKEY, "private signer key; a verifier takes the public key"),
        (Verifier.from_key, "PeterNeumann+c74f20a3", "must be <name>\\+<key id>\\+<key>"),
        (Verifier.from_key, PETER_VKEY.replace("c74f20a3", "C74F20A3"), "8 lowercase hex"),
        (Verifier.from_key, PETER_VKEY.replace("c74f20a3", "c74f20a4"), "does not match the key"),
        (Verifier.from_key, "Peter Neumann" + PETER_VKEY[12:], "name must be non-empty"),
        (Verifier.from_key, PETER_VKEY[:-1], "not valid base64"),
        (Signer.from_key, PETER_VKEY, "must start with PRIVATE\\+KEY\\+"),
        (Signer.from_key, PETER_SKEY.replace("c74f20a3", "00000000"), "does not match the key"),
        (CosignatureSigner.from_key, PETER_SKEY, "algorithm is 0x01, CosignatureSigner needs 0x04"),
    ]
    fragments = _secret_fragments(PETER_SKEY)
    for parse, key, message in cases:
        with pytest.raises(NoteError, match=message) as caught:
            parse(key)
        assert not any(f in str(caught.value) for f in fragments)


def test_signers_do_not_show_their_key() -> None:
    skey, _ = generate_key("example.com/log")
    signer = Signer.from_key(skey)
    shown = repr(signer) + str(signer) + repr(signer.verifier)
    assert not any(f in shown for f in _secret_fragments(skey))
    assert re.fullmatch(r"Signer\(name='example.com/log', key_id=[0-9a-f]{8}\)", repr(signer))


def test_names_follow_the_spec() -> None:
    for bad in ["", "a b", "a+b", "a\u00a0b", "a\u3000b", "a\nb", "a\x00b", "\ud800"]:
        with pytest.raises(NoteError, match="name"):
            generate_key(bad)
    unicode_name = "\u03c3.example/\u03bb"
    assert Verifier.from_key(generate_key(unicode_name)[1]).name == unicode_name


# -- witness cosignatures (c2sp.org/tlog-cosignature, type 0x04) ----------------


def test_cosignature_round_trip() -> None:
    log = Signer.from_key(generate_key("example.com/log")[0])
    witness_skey, witness_vkey = generate_cosignature_key("witness.example/w1")
    witness = CosignatureSigner.from_key(witness_skey)
    verifier = Verifier.from_key(witness_vkey)
    assert (verifier.algorithm, witness.verifier) == (ALG_COSIGNATURE_V1, verifier)
    assert verifier.key_id == compute_key_id(verifier.name, 0x04, verifier.public_key)

    signed = sign(CHECKPOINT_TEXT, [log])
    cosigned = cosign(signed, [witness], timestamp=1679315147)
    assert cosigned.startswith(signed)
    opened = open_note(cosigned, [log.verifier, verifier])
    assert [(s.verifier, s.timestamp) for s in opened.signatures] == [
        (log.verifier, None),
        (verifier, 1679315147),
    ]

    # The signed message, checked by hand against the spec's layout.
    blob = base64.b64decode(cosigned.rsplit(" ", 1)[1])
    assert blob[4:12] == (1679315147).to_bytes(8, "big")
    message = b"cosignature/v1\ntime 1679315147\n" + CHECKPOINT_TEXT.encode()
    Ed25519PublicKey.from_public_bytes(verifier.public_key).verify(blob[12:], message)


def test_cosign_replaces_its_own_earlier_cosignature() -> None:
    log = Signer.from_key(generate_key("example.com/log")[0])
    witness = CosignatureSigner.from_key(generate_cosignature_key("witness.example/w1")[0])
    other = CosignatureSigner.from_key(generate_cosignature_key("witness.example/w2")[0])
    first = cosign(sign(CHECKPOINT_TEXT, [log]), [witness, other], timestamp=100)
    again = cosign(first, [witness], timestamp=200)
    opened = open_note(again, [log.verifier, witness.verifier, other.verifier])
    assert [s.timestamp for s in opened.signatures] == [None, 100, 200]


def _skey(name: str, algorithm: int, seed: bytes) -> str:
    """A signer key written by hand, as Go's GenerateKey would write it."""
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes_raw()
    key_id = compute_key_id(name, algorithm, public)
    material = base64.b64encode(bytes([algorithm]) + seed).decode()
    return f"PRIVATE+KEY+{name}+{key_id:08x}+{material}"


def test_cosignatures_and_plain_signatures_do_not_mix() -> None:
    seed = bytes(range(32))
    plain = Signer.from_key(_skey("witness.example/w1", ALG_ED25519, seed))
    witness = CosignatureSigner.from_key(_skey("witness.example/w1", ALG_COSIGNATURE_V1, seed))
    assert plain.verifier.public_key == witness.verifier.public_key
    assert plain.key_id != witness.key_id  # the algorithm byte is in the key id
    log = Signer.from_key(generate_key("example.com/log")[0])
    cosigned = cosign(sign(CHECKPOINT_TEXT, [log]), [witness], timestamp=5)
    # The same Ed25519 key as a plain verifier does not even recognise the line.
    with pytest.raises(UnverifiedNote):
        open_note(cosigned, [plain.verifier])
    with pytest.raises(NoteError, match="algorithm is 0x04, Signer needs 0x01"):
        Signer.from_key(_skey("witness.example/w1", ALG_COSIGNATURE_V1, seed))


def test_cosignature_timestamps_and_frames_are_checked() -> None:
    log = Signer.from_key(generate_key("example.com/log")[0])
    seed = bytes(range(1, 33))
    witness = CosignatureSigner.from_key(_skey("witness.example/w1", ALG_COSIGNATURE_V1, seed))
    signed = sign(CHECKPOINT_TEXT, [log])
    cosigned = cosign(signed, [witness], timestamp=1000)
    line = open_note(cosigned, [log.verifier]).unverified[0]

    def reopen(signature: bytes) -> None:
        bent = NoteSignature(line.name, line.key_id, signature)
        open_note(signed + bent.line(), [log.verifier, witness.verifier])

    reopen(line.signature)
    # Past the spec's cap of 2**63 - 1, even when truly signed.
    over = 2**63
    message = b"cosignature/v1\ntime %d\n" % over + CHECKPOINT_TEXT.encode()
    over_cap = over.to_bytes(8, "big") + Ed25519PrivateKey.from_private_bytes(seed).sign(message)
    for signature in [
        (1001).to_bytes(8, "big") + line.signature[8:],  # another time
        over_cap,
        line.signature[:-1],  # short
        line.signature + b"\x00",  # long
    ]:
        with pytest.raises(BadSignature):
            reopen(signature)

    for timestamp in (-1, 2**63):
        with pytest.raises(NoteError, match=r"outside 0\.\.2\*\*63-1"):
            cosign(signed, [witness], timestamp=timestamp)
    with pytest.raises(NoteError, match="only checkpoints are cosigned"):
        cosign(sign("not a checkpoint\n", [log]), [witness], timestamp=1)
    with pytest.raises(NoteError, match="at least one cosigner"):
        cosign(signed, [], timestamp=1)
