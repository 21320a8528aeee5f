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
from typing import NoReturn

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def fail(why: object) -> NoReturn:
    sys.exit(f"NOT VERIFIED: {why}")


def checkpoint_of(note: str, vkey: str) -> tuple[str, int, bytes]:
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


def main(path: str, vkey: str) -> None:
    with open(path, encoding="utf-8") as file:
        receipt = json.load(file)
    operation = receipt["operation_id"]
    origin, size, root = checkpoint_of(receipt["checkpoint"], vkey)
    print(f"checkpoint {origin} size {size}: signature verified")
    for leaf in receipt["leaves"]:
        data = base64.b64decode(leaf["data"])
        hashed = hashlib.sha256(b"\x00" + data).digest()
        audit_path = [base64.b64decode(h) for h in leaf["path"]]
        if root_from_path(leaf["index"], size, hashed, audit_path) != root:
            fail(f"leaf {leaf['index']} is not in the signed tree")
        row = json.loads(data.split(b"\n", 1)[1])
        if (
            row.get("row", {}).get("operation_id", receipt["operation_id"])
            != receipt["operation_id"]
        ):
            fail(f"leaf {leaf['index']} belongs to another operation")
        print(f"  leaf {leaf['index']}: {row['kind']} {row['id']} proven")
    print(f"VERIFIED: {len(receipt['leaves'])} evidence row(s) of {operation}")


if __name__ == "__main__":
    try:
        main(*sys.argv[1:3])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        fail(exc)
    except Exception as exc:  # an invalid signature, a broken file
        fail(f"{type(exc).__name__}: {exc}")
