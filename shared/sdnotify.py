"""systemd readiness and watchdog notifications, without a dependency.

When run under `Type=notify`, systemd sets NOTIFY_SOCKET; we send READY=1 once
serving, WATCHDOG=1 from the main loop (so a wedged loop gets restarted) and
STOPPING=1 on shutdown. Outside systemd every call is a no-op.
"""

from __future__ import annotations

import os
import socket


def notify(message: str) -> bool:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace socket
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
        return True
    except OSError:
        return False


def watchdog_interval_seconds() -> float | None:
    """Half the WatchdogSec systemd asked for, or None when no watchdog is set."""
    usec = os.environ.get("WATCHDOG_USEC")
    if not usec or not usec.isdigit():
        return None
    pid = os.environ.get("WATCHDOG_PID")
    if pid and pid.isdigit() and int(pid) != os.getpid():
        return None
    return int(usec) / 2_000_000
