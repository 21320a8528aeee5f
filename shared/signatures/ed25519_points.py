"""Refusing Ed25519 public keys anyone can sign for.

`cryptography` loads any 32 bytes as a public key. A point of small order
(the identity, the all-zero encoding, the other torsion points) or a
non-canonical encoding makes "valid" signatures computable without a private
key, so such a key must never be accepted, at config load or at verify time.
Arithmetic follows RFC 8032 §5.1 (decoding, extended coordinates); it runs
once per configured key, so plain Python integers are fast enough.
"""

from __future__ import annotations

P = 2**255 - 19
D = (-121665 * pow(121666, P - 2, P)) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)
COFACTOR = 8

Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T)


def _decode(raw: bytes) -> Point | None:
    """RFC 8032 §5.1.3 point decoding; None for a non-canonical or off-curve encoding."""
    if len(raw) != 32:
        return None
    value = int.from_bytes(raw, "little")
    y = value & ((1 << 255) - 1)
    sign = value >> 255
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    if x2 == 0:
        if sign:
            return None  # -0 is a second spelling of x = 0
        return (0, y, 1, 0)
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P:
        return None
    if x & 1 != sign:
        x = P - x
    return (x, y, 1, x * y % P)


def _add(a: Point, b: Point) -> Point:
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    e1 = (y1 - x1) * (y2 - x2) % P
    h1 = (y1 + x1) * (y2 + x2) % P
    c = t1 * 2 * D * t2 % P
    dd = z1 * 2 * z2 % P
    e, f, g, h = h1 - e1, dd - c, dd + c, h1 + e1
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def _is_identity(point: Point) -> bool:
    x, y, z, _ = point
    return x % P == 0 and (y - z) % P == 0


def is_safe_public_key(raw: bytes) -> bool:
    """A canonical encoding of a point on the curve whose order is not small."""
    point = _decode(raw)
    if point is None:
        return False
    multiple = point
    for _ in range(3):  # 2^3 = the cofactor
        multiple = _add(multiple, multiple)
    return not _is_identity(multiple)
