"""One default cancel deadline, the one the README's key reference states.

The ledger falls back on its own default when no provider limit is known (a
provider no longer configured, or `jobwarden cancel` run where the config
cannot be read: "note: default cancel deadline used"). It was 600 s while
a provider's `limits.cancel_deadline_seconds` defaults to 900 s: "the
default" meant two things.
"""

from __future__ import annotations

from shared.ledger import DEFAULT_CANCEL_DEADLINE_S
from shared.providers.description import Limits


def test_the_ledgers_fallback_is_the_providers_default() -> None:
    assert DEFAULT_CANCEL_DEADLINE_S == Limits().cancel_deadline_seconds == 900.0
