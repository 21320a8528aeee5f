"""Random JSON documents for tests that compare two readers of one body."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """Integers of every size (past 64 bits too), floats of every magnitude,
    strings from every plane, and nesting up to four levels."""
    kind = rng.randrange(6 if depth < 4 else 4)
    if kind == 0:
        edges = [0, -1, 2**63 - 1, -(2**63), 2**64]
        scale = 10 ** rng.randrange(1, 30)
        return rng.choice([*edges, rng.randrange(-scale, scale)])
    if kind == 1:
        return rng.uniform(-1e6, 1e6) * 10 ** rng.randrange(-300, 300)
    if kind == 2:
        return "".join(
            chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x10FFFF)]))
            for _ in range(rng.randrange(8))
        )
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {f"k{i}": random_value(rng, depth + 1) for i in range(rng.randrange(4))}


def random_bodies(seed: int, documents: int) -> Iterator[tuple[bytes, Any]]:
    """(body, what json.loads reads from it): each document as ASCII-escaped and
    as raw UTF-8 text (a lone surrogate drawn at random is kept, as
    `surrogatepass` bytes, which json.loads reads back)."""
    rng = random.Random(seed)
    for _ in range(documents):
        document = {"job_id": random_value(rng), "payload": random_value(rng, 1)}
        for ensure_ascii in (True, False):
            body = json.dumps(document, ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass")
            yield body, json.loads(body)
