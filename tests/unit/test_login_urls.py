"""The login URLs tests build for roles they create keep the server they name."""

from __future__ import annotations

from tests.integration.console_support import as_login


def test_a_login_url_keeps_the_server_it_names() -> None:
    """An embedded server is named by a Unix-socket directory in the query: kept as is."""
    embedded = "postgresql://postgres@/jw_x?host=/srv/jw/.pgdata&port=5433"
    assert as_login(embedded, "alice") == "postgresql://alice@/jw_x?host=/srv/jw/.pgdata&port=5433"
    local = "postgresql://postgres:pw@127.0.0.1:5432/jw"
    assert as_login(local, "bob") == "postgresql://bob@127.0.0.1:5432/jw"  # no password kept
