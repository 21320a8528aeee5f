"""Value paths that pick a list's element by a member's value: `[member=value]`.

CloudConvert answers a job with its tasks in a list whose order it does not
promise; the export task's file and the failed task's message are found by
what the task is (`operation`, `status`), not where it stands.
"""

from __future__ import annotations

from typing import Any

import pytest

from shared.providers import ConfigError, parse_providers
from shared.providers.paths import PathSyntaxError, Selector, extract, parse_path, set_value

TASKS: list[Any] = [
    {"name": "import-1", "operation": "import/url", "status": "finished"},
    {
        "name": "convert-1",
        "operation": "convert",
        "status": "error",
        "code": "INVALID_CONVERSION_TYPE",
        "message": "conversion type not supported",
    },
    {
        "name": "export-1",
        "operation": "export/url",
        "status": "finished",
        "result": {"files": [{"filename": "a.pdf", "url": "https://storage.example.test/a"}]},
    },
]
JOB = {"data": {"status": "error", "tasks": TASKS}}
EXPORTED = ("data", "tasks", Selector("operation", "export/url"), "result", "files", "0", "url")


# ----------------------------------------------------------------------- parsing


def test_the_pointer_spelling_keeps_slashes_in_the_value() -> None:
    path = parse_path("/data/tasks/[operation=export/url]/result/files/0/url")
    assert path.segments == EXPORTED
    assert path.has_selector


def test_the_dotted_spelling_keeps_dots_and_colons_in_the_value() -> None:
    assert parse_path("data.tasks[operation=export/url].result.files.0.url").segments == EXPORTED
    assert parse_path("files[filename=a.pdf].url").segments == (
        "files",
        Selector("filename", "a.pdf"),
        "url",
    )
    assert parse_path("tasks[url=https://x.test/a].name").segments == (
        "tasks",
        Selector("url", "https://x.test/a"),
        "name",
    )


@pytest.mark.parametrize(
    ("text", "segments"),
    [
        ("[name=x].id", (Selector("name", "x"), "id")),  # a body that is a list
        ("/[name=x]/id", (Selector("name", "x"), "id")),
        ("a.[k=v].b", ("a", Selector("k", "v"), "b")),  # the same as a[k=v].b
        ("rows[k=1][j=2]", ("rows", Selector("k", "1"), Selector("j", "2"))),
        ("/rows/[k=1]/[j=2]", ("rows", Selector("k", "1"), Selector("j", "2"))),
        ("/t/[status=error]", ("t", Selector("status", "error"))),
        ("/t/[k=a=b]", ("t", Selector("k", "a=b"))),  # the member ends at the first '='
        ("/t/[k=]", ("t", Selector("k", ""))),  # the empty string
        ("/t/[k=a]b]/c", ("t", Selector("k", "a]b"), "c")),  # ']' ends it before '/' or the end
        ("/t/[k=a]~1b]", ("t", Selector("k", "a]/b"))),  # ...so ']/' in a value is ']~1'
        ("/t/[k=~0x~2]", ("t", Selector("k", "~x["))),
        ("/t/[a~1b=v]", ("t", Selector("a/b", "v"))),  # a member holding '/', escaped
        ("/t/[a.b=v]", ("t", Selector("a.b", "v"))),  # one member named "a.b": no nesting
        ("/t/[k=v]/", ("t", Selector("k", "v"), "")),
        ("t[k=a[1]]", ("t", Selector("k", "a[1]"))),
    ],
)
def test_selector_forms(text: str, segments: tuple[Any, ...]) -> None:
    assert parse_path(text).segments == segments


def test_a_key_starting_with_a_bracket_is_reached_by_the_tilde_2_escape() -> None:
    path = parse_path("/~2a=b]")
    assert path.segments == ("[a=b]",) and not path.has_selector
    assert extract(path, {"[a=b]": 1}) == 1
    assert parse_path("/x/a[0]").segments == ("x", "a[0]")  # '[' past a key's start is plain
    assert parse_path("/x~1y/~0t/~01").segments == ("x/y", "~t", "~1")  # RFC 6901 as before


def test_plain_paths_parse_as_before() -> None:
    path = parse_path("/a/b/0")
    assert path.segments == ("a", "b", "0") and not path.has_selector
    assert parse_path("a.b.0").segments == ("a", "b", "0")
    assert parse_path("header:X-Task").segments == ("X-Task",)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("/a/[k=v", "no closing ']'"),
        ("/a/[k=v]x", "no closing ']'"),
        ("a[k=v", "no closing ']'"),
        ("a[k=v]x", "no closing ']'"),
        ("/a/[kv]", "[member=value]"),
        ("/a/[0]", "[member=value]"),
        ("a[0]", "[member=value]"),
        ("/a/[=v]", "empty member name"),
        ("a[=v]", "empty member name"),
        ("a[k.b=v]", "no nesting"),
        ("/a/[k/b=v]", "no nesting"),
        ("a[k=v w]", "whitespace"),
        ("a[ k=v]", "whitespace"),
        ("/a/[k=~9]", "'~' must be followed by 0, 1 or 2"),
        ("/a/~3", "'~' must be followed by 0, 1 or 2"),
        ("a[k=v].", "empty segment"),
        ("a.[k=v]..b", "empty segment"),
    ],
)
def test_a_malformed_selector_names_the_path(text: str, reason: str) -> None:
    with pytest.raises(PathSyntaxError) as caught:
        parse_path(text)
    assert f"'{text}'" in str(caught.value)
    assert reason in str(caught.value)


def test_a_malformed_selector_is_a_config_error_naming_the_key() -> None:
    table = {
        "base_url": "https://api.example.test",
        "create": {"path": "/v2/jobs", "idempotency": "none", "job_id": "/data/id"},
        "status": {
            "path": "/v2/jobs/{job_id}",
            "state": "/data/status",
            "state_map": {"finished": "succeeded"},
            "error_message": "/data/tasks/[status error]/message",
        },
        "result": {"source": "none"},
    }
    with pytest.raises(ConfigError) as caught:
        parse_providers({"providers": {"p": table}}, "test.toml", {})
    message = str(caught.value)
    assert "providers.p.status.error_message" in message
    assert "/data/tasks/[status error]/message" in message


# -------------------------------------------------------------------- extraction


def test_both_spellings_find_the_export_task_wherever_it_stands() -> None:
    pointer = parse_path("/data/tasks/[operation=export/url]/result/files/0/url")
    dotted = parse_path("data.tasks[operation=export/url].result.files.0.url")
    for tasks in (TASKS, TASKS[::-1], TASKS[1:] + TASKS[:1]):
        body = {"data": {"tasks": tasks}}
        assert extract(pointer, body) == "https://storage.example.test/a"
        assert extract(dotted, body) == "https://storage.example.test/a"


def test_the_failed_tasks_message() -> None:
    assert extract(parse_path("/data/tasks/[status=error]/message"), JOB) == (
        "conversion type not supported"
    )
    assert extract(parse_path("data.tasks[status=error].code"), JOB) == "INVALID_CONVERSION_TYPE"


def test_the_first_match_wins() -> None:
    rows = {"rows": [{"k": "a", "n": 1}, {"k": "b", "n": 2}, {"k": "b", "n": 3}]}
    assert extract(parse_path("rows[k=b].n"), rows) == 2
    assert extract(parse_path("rows[k=b]"), rows) == {"k": "b", "n": 2}


def test_no_match_or_no_list_is_none() -> None:
    assert extract(parse_path("/data/tasks/[operation=export/s3]/result"), JOB) is None
    assert extract(parse_path("/data/tasks/[nope=x]"), JOB) is None
    assert extract(parse_path("/data/[status=error]"), JOB) is None  # an object, not a list
    assert extract(parse_path("/data/status/[k=v]"), JOB) is None  # a string
    assert extract(parse_path("[k=v]"), None) is None
    assert extract(parse_path("rows[k=v]"), {"rows": []}) is None


def test_elements_that_are_not_objects_are_passed_over() -> None:
    rows = {"rows": [1, "k=v", None, ["k", "v"], {"k": "v", "x": 9}]}
    assert extract(parse_path("rows[k=v].x"), rows) == 9


@pytest.mark.parametrize(
    ("value", "text", "matches"),
    [
        (3, "3", True),
        (3, "3.0", False),
        (2.5, "2.5", True),
        (-1, "-1", True),
        (True, "true", True),
        (False, "false", True),
        (True, "True", False),
        (True, "1", False),  # a boolean is not the number 1
        (1, "true", False),
        ("3", "3", True),  # a string is compared as it is
        (None, "null", False),  # null is no value: it never matches
        ({"a": 1}, '{"a": 1}', False),  # nor does an object
        (["a"], '["a"]', False),  # or a list
        ("", "", True),
    ],
)
def test_numbers_and_booleans_compare_as_json_renders_them(
    value: Any, text: str, matches: bool
) -> None:
    body = {"rows": [{"k": value, "hit": True}]}
    found = extract(parse_path(f"/rows/[k={text}]/hit"), body)
    assert (found is True) is matches


def test_a_selector_on_an_object_is_no_key_of_it() -> None:
    # a dict never holds a Selector key, whatever its text
    body = {"m": {"[k=v]": 1, "k=v": 2, "k": "v"}}
    assert extract(parse_path("/m/[k=v]"), body) is None
    assert extract(parse_path("/m/~2k=v]"), body) == 1


def test_plain_paths_extract_as_before() -> None:
    doc = {"a": {"b": [{"c": 1}, {"c": 2}]}, "n": None}
    assert extract(parse_path("/a/b/1/c"), doc) == 2
    assert extract(parse_path("a.b.0.c"), doc) == 1
    assert extract(parse_path("/a/b/x"), doc) is None
    assert extract(parse_path("/a/b/7"), doc) is None
    assert extract(parse_path("/n/x"), doc) is None


# ---------------------------------------------------------------------- writing


def test_set_value_refuses_a_selector() -> None:
    body: dict[str, Any] = {"inputs": [{"name": "prompt"}]}
    with pytest.raises(PathSyntaxError) as caught:
        set_value(body, parse_path("inputs[name=prompt].value"), "x")
    assert "'inputs[name=prompt].value'" in str(caught.value)
    assert "selector" in str(caught.value)
    assert body == {"inputs": [{"name": "prompt"}]}  # untouched


def test_set_value_writes_a_key_that_starts_with_a_bracket() -> None:
    body: dict[str, Any] = {}
    set_value(body, parse_path("/meta/~2op]"), "op_1")
    assert body == {"meta": {"[op]": "op_1"}}


def _create(**create: Any) -> dict[str, Any]:
    return {
        "base_url": "https://api.example.test",
        "create": {"path": "/v2/jobs", "idempotency": "none", "job_id": "/data/id", **create},
        "status": {
            "path": "/v2/jobs/{job_id}",
            "state": "/data/status",
            "state_map": {"finished": "succeeded"},
        },
        "result": {"source": "none"},
    }


@pytest.mark.parametrize(
    ("create", "key"),
    [
        ({"client_reference_field": "tags[k=ref].v"}, "create.client_reference_field"),
        (
            {"idempotency": "body", "idempotency_body_field": "/meta/[k=v]/token"},
            "create.idempotency_body_field",
        ),
        (
            {"set_body": {"tasks[name=in].url": "{webhook_url}"}},
            "create.set_body.tasks[name=in].url",
        ),
    ],
)
def test_a_path_jobwarden_writes_may_not_hold_a_selector(create: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_providers({"providers": {"p": _create(**create)}}, "test.toml", {})
    message = str(caught.value)
    assert f"providers.p.{key}:" in message
    assert "selector" in message and "written" in message
