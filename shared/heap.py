"""Keeping the garbage collector's full passes off what lives for the whole process.

A daemon's start-up (modules, the app, its routes, the MCP SDK, pydantic's
schemas, configuration) leaves over 100,000 objects the collector tracks and
that never die. Every full (oldest-generation) collection walked all of them:
the receiver under load measured pauses of up to 76 ms, each one stalling
every request in flight, which set its p99. `settle()` moves them to the
permanent generation once start-up is over, so a full pass walks only what
was made since.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Freeze what start-up made (call once, when the process is about to serve).

    A collection first, so garbage from start-up is freed rather than frozen;
    objects made later are collected as usual.
    """
    gc.collect()
    gc.freeze()
