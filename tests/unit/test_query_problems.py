"""A command's query refused for a reason the operator acts on is said in one line."""

from __future__ import annotations

import asyncpg
import pytest

from shared.db.errors import query_problem


@pytest.mark.parametrize(
    "exc", [asyncpg.DeadlockDetectedError("deadlock"), asyncpg.SerializationError("conflict")]
)
def test_a_command_the_database_undid_for_a_concurrent_one_says_look_again(
    exc: Exception,
) -> None:
    problem = query_problem(exc)
    assert problem is not None and problem.code == "conflict"
    assert "jobwarden show" in problem.hint


def test_a_constraint_is_left_as_it_is() -> None:
    assert query_problem(asyncpg.CheckViolationError("x")) is None
