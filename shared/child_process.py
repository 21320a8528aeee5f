"""What every child process a jobwarden daemon starts shares."""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the parent dies, however it dies.

    Without it a parent killed outright (OOM, SIGKILL, run by hand) would leave
    its children running beside the next one's: receivers serving the port,
    a sequencer holding the log's lock.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
