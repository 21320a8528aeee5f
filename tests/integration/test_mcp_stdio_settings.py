"""`jobwarden mcp` without JW_API_URL / JW_API_TOKEN: it still starts (an MCP client
launches it and lists its tools) but says on stderr, at once, that every tool call
will fail. Before, it started and ended silently (exit 0), and only an agent's
first tool call learned what was missing. A real process, stdin closed at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

JOBWARDEN = Path(sys.executable).parent / "jobwarden"


def run_mcp(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("JW_API_")}
    return subprocess.run(
        [str(JOBWARDEN), "mcp"],
        env=clean | env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("given", [{}, {"JW_API_URL": "http://127.0.0.1:9"}])
def test_a_server_that_cannot_reach_the_api_says_so_at_start(given: dict[str, str]) -> None:
    done = run_mcp(**given)
    assert done.returncode == 0, done.stderr
    assert "set JW_API_URL and JW_API_TOKEN" in done.stderr, done.stderr
    assert "every tool call will fail" in done.stderr, done.stderr
    assert done.stdout == ""  # stdout is the protocol's alone


def test_a_configured_server_says_nothing_of_it() -> None:
    done = run_mcp(JW_API_URL="http://127.0.0.1:9", JW_API_TOKEN="jw_test_token")
    assert done.returncode == 0, done.stderr
    assert "JW_API_URL" not in done.stderr, done.stderr
    assert "jw_test_token" not in done.stderr


@pytest.mark.parametrize(
    "given",
    [
        {"JW_API_URL": "http://127.0.0.1:9", "JW_API_TOKEN": "jw_tökén_secret"},
        {"JW_API_URL": "http://[::1", "JW_API_TOKEN": "jw_test_secret"},
    ],
)
def test_settings_no_client_can_be_built_from_are_said_at_start_not_a_crash(
    given: dict[str, str],
) -> None:
    """A token an HTTP header cannot carry (a character past ASCII, pasted in) or a URL
    httpx cannot parse: the server starts and says so, as for a missing one, without
    the token. Before, the check at start built the client, and its UnicodeEncodeError
    or InvalidURL was a traceback and exit 1 (at the first tool call, before that)."""
    done = run_mcp(**given)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "every tool call will fail" in done.stderr, done.stderr
    assert "secret" not in done.stderr, done.stderr
