#!/usr/bin/env python3
"""Verify a jobwarden receipt with nothing but its public key (Python 3 + `cryptography`).

    python3 verify-receipt.py receipt.json 'name+1a2b3c4d+AQ…'

Checks the checkpoint's C2SP signed-note signature (Ed25519), then walks each
leaf up its RFC 9162 audit path to the signed root. Prints every proven row;
exits 1 on the first thing that does not hold. Independent of jobwarden's code.
"""

import base64
import hashlib
import json
import sys
from typing import Any, NoReturn

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def fail(why: object) -> NoReturn:
    sys.exit(f"NOT VERIFIED: {why}")


def checkpoint_of(note: str, vkey: str) -> tuple[str, int, bytes]:
    if vkey.count("+") < 2:  # a file name, most likely: say so, not "not enough values"
        fail('the public key is its text, name+id+base64 ("$(cat log.pub)"), not a file name')
    name, key_id, encoded = vkey.split("+", 2)
    key = base64.b64decode(encoded)
    if key[0] != 1 or hashlib.sha256(name.encode() + b"\n" + key).digest()[:4].hex() != key_id:
        fail("malformed public key")
    text, _, signatures = note.partition("\n\n")
    text += "\n"
    for line in signatures.splitlines():
        prefix = f"\u2014 {name} "
        if not line.startswith(prefix):
            continue
        signature = base64.b64decode(line[len(prefix) :])
        if signature[:4].hex() == key_id:
            Ed25519PublicKey.from_public_bytes(key[1:]).verify(signature[4:], text.encode())
            origin, size, root = text.splitlines()[:3]
            if not size.isascii() or not size.isdigit():
                fail("malformed checkpoint size")
            return origin, int(size), base64.b64decode(root)
    fail("no signature by this key")


def root_from_path(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes:
    # RFC 9162 section 2.1.3.2
    if index >= size:
        fail("leaf index outside the tree")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            fail("audit path too long")
        if fn % 2 == 1 or fn == sn:
            r = hashlib.sha256(b"\x01" + p + r).digest()
            while fn % 2 == 0 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = hashlib.sha256(b"\x01" + r + p).digest()
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        fail("audit path too short")
    return r


def proven_row(leaf: dict[str, Any], size: int, root: bytes) -> dict[str, Any]:
    index, data = leaf["index"], base64.b64decode(leaf["leaf"], validate=True)
    document = base64.b64decode(leaf["row"], validate=True)
    if not isinstance(index, int) or not 0 <= index < size:
        fail(f"leaf index {index!r} is not in a tree of size {size}")
    audit_path = [base64.b64decode(h, validate=True) for h in leaf["path"]]
    if root_from_path(index, size, hashlib.sha256(b"\x00" + data).digest(), audit_path) != root:
        fail(f"leaf {index} is not in the signed tree")
    prefix = b"jobwarden/evidence-leaf/v1\n"
    if not data.startswith(prefix):
        fail(f"leaf {index} is not a jobwarden evidence leaf")
    named = json.loads(data[len(prefix) :])
    if named["deleted"] is not False or named["row"] != hashlib.sha256(document).hexdigest():
        fail(f"leaf {index} does not name this row")
    if (named["kind"], named["id"]) != (leaf["kind"], leaf["id"]):
        fail(f"leaf {index} is labelled as another row")
    row: dict[str, Any] = json.loads(document)
    row["_kind"], row["_id"], row["_index"] = named["kind"], named["id"], index
    return row


def main(path: str, vkey: str) -> None:
    with open(path, encoding="utf-8") as file:
        receipt = json.load(file)
    operation = receipt["operation_id"]
    origin, size, root = checkpoint_of(receipt["checkpoint"], vkey)
    print(f"checkpoint {origin} size {size}: signature verified")
    rows = [proven_row(leaf, size, root) for leaf in receipt["leaves"]]
    if not rows:
        fail("the receipt proves nothing")
    # each row is the operation's, a failed item through a result of it proven here
    results = {r.get("result_id") for r in rows if r["_kind"] == "result"}
    for row in rows:
        mine = row.get("operation_id") == operation
        if row["_kind"] == "failure":
            mine = row.get("result_id") in results
        if not mine:
            fail(f"{row['_kind']} {row['_id']} is not shown to belong to {operation}")
        print(f"  leaf {row['_index']}: {row['_kind']} {row['_id']} proven")
    print(f"VERIFIED: {len(rows)} evidence row(s) of {operation}")


if __name__ == "__main__":
    try:
        main(*sys.argv[1:3])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        fail(exc)
    except Exception as exc:  # an invalid signature, a broken file
        fail(f"{type(exc).__name__}: {exc}")
