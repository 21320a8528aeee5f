"""Classify transport failures by whether the request may have reached the provider.

This is the distinction the whole create protocol rests on (seed 000: a
connection or a timeout after sending proves nothing). Categories:

- ``connect``  no connection was obtained (refused, DNS, TLS handshake,
  connect timeout, pool timeout): the request never left, so it was
  **not delivered** and a create may be retried freely;
- ``timeout``  read/write timeout after the connection was up: **may have
  been delivered**;
- ``reset``    the connection broke mid-exchange: **may have been delivered**;
- ``protocol`` the peer answered something that is not HTTP, or closed
  without an answer: **may have been delivered**;
- ``other``    anything else: treated as **may have been delivered**, the safe
  assumption.
"""

from __future__ import annotations

from typing import Literal

import httpx

TransportCategory = Literal["timeout", "connect", "reset", "protocol", "other"]


def classify_transport_error(exc: BaseException) -> TransportCategory:
    """The category of a failed exchange (order matters: subclasses first)."""
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout | httpx.ConnectError):
        return "connect"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout"
    if isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.CloseError):
        return "reset"
    if isinstance(exc, httpx.ProtocolError):
        return "protocol"
    if isinstance(exc, ConnectionRefusedError):
        return "connect"
    if isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionAbortedError):
        return "reset"
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "other"


def may_have_been_delivered(category: TransportCategory) -> bool:
    """False only when the request provably never left this process."""
    return category != "connect"
