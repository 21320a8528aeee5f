"""The README's table of signature schemes names each scheme's options, all of them.

`[webhooks] options` are refused when unknown (a typo must not disable a
check), so an option the README leaves out is one a reader cannot use, and
one it names that the scheme refuses stops the daemon. The options each
scheme takes are asked of the scheme itself: an unknown option's refusal
lists them. The `hmac` and `asymmetric` families say "see below": their
options are the rows of the table that follows.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared import signatures
from shared.providers.description import WebhookScheme

README = Path(__file__).resolve().parents[2] / "README.md"
FAMILIES = {"hmac", "asymmetric"}


def allowed_options(scheme: str) -> set[str]:
    with pytest.raises(ValueError, match="allowed options: ") as refused:
        signatures.check_options(scheme, {"no_such_option": 1})
    listed = str(refused.value).split("allowed options: ", 1)[1].rstrip(")")
    return set() if listed == "none" else {name.strip() for name in listed.split(",")}


def section() -> str:
    text = README.read_text("utf-8")
    start = text.index("\n### Webhook signature schemes\n")
    return text[start : text.index("\nExamples:\n", start)]


def scheme_rows() -> dict[str, str]:
    """scheme → its row's last cell (the options)."""
    rows: dict[str, str] = {}
    for line in section().splitlines():
        match = re.match(r"\| `([a-z_]+)` \|", line)
        if match and line.count(" | ") >= 7:
            rows[match.group(1)] = line.rstrip(" |").rsplit(" | ", 1)[1]
    return rows


def family_options(family: str) -> set[str]:
    """The rows of the families' table: `option` for both, `option` (`family`) for one."""
    found: set[str] = set()
    for line in section().splitlines():
        match = re.match(r"\| `([a-z_]+)`(?: \(`([a-z]+)`\))? \|", line)
        if match and match.group(1) not in scheme_rows() and match.group(2) in (None, family):
            found.add(match.group(1))
    return found


@pytest.mark.parametrize("scheme", [s.value for s in WebhookScheme])
def test_the_readme_names_exactly_the_options_a_scheme_takes(scheme: str) -> None:
    rows = scheme_rows()
    assert scheme in rows, f"no row for scheme {scheme}"
    if scheme in FAMILIES:
        assert "see below" in rows[scheme]
        named = family_options(scheme)
    else:
        named = set(re.findall(r"`([a-z_]+)`", rows[scheme]))
    assert named == allowed_options(scheme)
