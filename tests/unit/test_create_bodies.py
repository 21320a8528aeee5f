"""A create sent as a form: the encoder (shared/providers/bodies.py) and its configuration.

Multipart bodies are read back with the standard library's MIME parser, a
reader independent of the encoder; forms with urllib's.
"""

from __future__ import annotations

import base64
import copy
import email.parser
import email.policy
import json
from typing import Any
from urllib.parse import parse_qsl

import pytest

from shared.providers import ConfigError, parse_providers
from shared.providers.bodies import encode
from shared.providers.description import BodyEncoding
from shared.providers.errors import RequestBuildError
from shared.providers.requests import build_create

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
IMAGE = {
    "content_base64": base64.b64encode(PNG).decode(),
    "filename": "cat.png",
    "content_type": "image/png",
}


def parts(body: bytes, content_type: str) -> list[tuple[str, str | None, str, bytes]]:
    """(name, filename, content type, bytes) of each part, as a MIME reader sees them."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    assert message.is_multipart()
    return [
        (
            part.get_param("name", header="content-disposition"),
            part.get_filename(),
            part.get_content_type(),
            part.get_payload(decode=True),
        )
        for part in message.iter_parts()
    ]


def test_a_multipart_body_carries_each_member_as_a_field_and_files_as_files() -> None:
    body = {
        "image": IMAGE,
        "seed": 0,
        "cfg_scale": 1.8,
        "loop": True,
        "prompt": 'a cat, "quoted" — ünïcode',
        "tags": ["a", "b"],
        "options": {"fps": 24},
        "negative_prompt": None,
    }
    content, content_type = encode(body, BodyEncoding.MULTIPART)
    assert content_type.startswith("multipart/form-data; boundary=jobwarden-")
    assert parts(content, content_type) == [
        ("image", "cat.png", "image/png", PNG),
        ("seed", None, "text/plain", b"0"),
        ("cfg_scale", None, "text/plain", b"1.8"),
        ("loop", None, "text/plain", b"true"),
        ("prompt", None, "text/plain", 'a cat, "quoted" — ünïcode'.encode()),
        ("tags", None, "text/plain", b"a"),
        ("tags", None, "text/plain", b"b"),
        ("options", None, "application/json", b'{"fps":24}'),
    ]


def test_the_same_body_is_the_same_bytes_and_the_boundary_is_in_no_part() -> None:
    """A create retried with the same token sends what the first attempt sent."""
    body = {"image": IMAGE, "seed": 7}
    first, first_type = encode(copy.deepcopy(body), BodyEncoding.MULTIPART)
    again, again_type = encode(copy.deepcopy(body), BodyEncoding.MULTIPART)
    assert (first, first_type) == (again, again_type)
    boundary = first_type.partition("boundary=")[2]
    _other, other_type = encode({"image": IMAGE, "seed": 8}, BodyEncoding.MULTIPART)
    assert other_type != first_type
    # a part holding the boundary it would get pushes it to the next one
    tricky = {"text": f"--{boundary}"}
    content, tricky_type = encode(tricky, BodyEncoding.MULTIPART)
    assert parts(content, tricky_type) == [("text", None, "text/plain", f"--{boundary}".encode())]


def test_a_form_body_is_url_encoded_and_refuses_an_object() -> None:
    body = {"url": "https://x.test/a.mp3?x=1&y=2", "speakers": 2, "tags": ["a", "b"], "n": None}
    content, content_type = encode(body, BodyEncoding.FORM)
    assert content_type == "application/x-www-form-urlencoded"
    assert parse_qsl(content.decode(), strict_parsing=True) == [
        ("url", "https://x.test/a.mp3?x=1&y=2"),
        ("speakers", "2"),
        ("tags", "a"),
        ("tags", "b"),
    ]
    with pytest.raises(RequestBuildError) as caught:
        encode({"image": IMAGE}, BodyEncoding.FORM)
    assert str(caught.value) == (
        "create body field 'image' is a JSON object: a form carries text only"
    )


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"image": {**IMAGE, "content_base64": "not base64!"}}, "content_base64 is not base64"),
        ({"image": {**IMAGE, "filename": 'x".png'}}, "its filename holds a quote or a line"),
        ({"image": {**IMAGE, "content_type": "image/png\r\nX: 1"}}, "its content_type holds"),
        ({"image": {**IMAGE, "filename": 3}}, "its members must be strings"),
    ],
    ids=["base64", "filename", "content-type", "not-a-string"],
)
def test_a_file_that_cannot_be_sent_is_refused_naming_the_field(
    body: dict[str, Any], problem: str
) -> None:
    with pytest.raises(RequestBuildError, match=f"create body file 'image': {problem}"):
        encode(body, BodyEncoding.MULTIPART)


def test_a_body_that_is_not_an_object_has_no_fields() -> None:
    with pytest.raises(RequestBuildError, match="a multipart body must be a JSON object"):
        encode(["a"], BodyEncoding.MULTIPART)


BASE: dict[str, Any] = {
    "base_url": "https://api.stability.test",
    "create": {
        "path": "/v2beta/image-to-video",
        "idempotency": "none",
        "job_id": "/id",
        "encoding": "multipart",
    },
    "status": {
        "path": "/v2beta/results/{job_id}",
        "state": "/status",
        "state_map": {"ok": "succeeded"},
    },
    "result": {"source": "none"},
}


def provider(create: dict[str, Any]) -> Any:
    table = copy.deepcopy(BASE)
    table["create"].update(create)
    return parse_providers({"providers": {"p": table}}, "config.toml", {})["p"]


def test_a_form_create_is_built_with_its_content_type_and_the_fields_we_write() -> None:
    desc = provider(
        {
            "set_body": {"/callback": "https://hooks.test/{operation_id}", "/mode": "fast"},
            "client_reference_field": "/reference",
        }
    )
    req = build_create(
        desc, body={"image": IMAGE}, idempotency_token="tok", client_reference="op_1"
    )
    assert req.content is not None
    assert req.headers["Content-Type"].startswith("multipart/form-data; boundary=jobwarden-")
    found = {name: data for name, _f, _t, data in parts(req.content, req.headers["Content-Type"])}
    assert found == {
        "image": PNG,
        "callback": b"https://hooks.test/op_1",
        "mode": b"fast",
        "reference": b"op_1",
    }
    assert req.json["image"] == IMAGE  # what it was built from, as every create is


@pytest.mark.parametrize(
    ("create", "key", "problem"),
    [
        (
            {"encoding": "form", "set_body": {"/meta/ref": "x"}},
            "set_body./meta/ref",
            "one text field per top-level",
        ),
        (
            {"encoding": "form", "client_reference_field": "/meta/ref"},
            "client_reference_field",
            "one text field per",
        ),
        (
            {"set_headers": {"Content-Type": "application/json"}},
            "set_headers.Content-Type",
            "Content-Type is set as it is sent",
        ),
        (
            {"set_headers": {"Content-Type": "multipart/form-data"}},
            "set_headers.Content-Type",
            "create.encoding",
        ),
        ({"encoding": "xml"}, "encoding", ""),
    ],
    ids=["nested-set-body", "nested-reference", "json-type", "form-type", "unknown"],
)
def test_a_form_create_that_could_not_be_sent_is_refused_at_load(
    create: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        provider(create)
    message = str(caught.value)
    assert message.startswith(f"config.toml: providers.p.create.{key}: "), message
    assert problem in message


def test_a_multipart_create_writes_our_reference_into_a_json_part() -> None:
    """Speechmatics' batch create is multipart: `config` (a JSON part) and
    `data_file`. The only field a job keeps that the caller chooses, and that its
    list returns, is `config.tracking.reference`: our operation id goes there, a
    path below the top level, written into the JSON part. Before, the load refused
    any such path for multipart ("one field per top-level member"), so a lost
    create of Speechmatics could never be looked up."""
    desc = provider({"client_reference_field": "/config/tracking/reference"})
    req = build_create(
        desc,
        body={"config": {"type": "transcription"}, "data_file": IMAGE},
        idempotency_token="tok",
        client_reference="op_1",
    )
    assert req.content is not None
    found = {
        name: (ctype, data)
        for name, _f, ctype, data in parts(req.content, req.headers["Content-Type"])
    }
    assert found["data_file"] == ("image/png", PNG)
    ctype, data = found["config"]
    assert ctype == "application/json"
    assert json.loads(data) == {"type": "transcription", "tracking": {"reference": "op_1"}}


@pytest.mark.parametrize(
    "body",
    [{"config": "{}", "data_file": IMAGE}, {"config": IMAGE}],
    ids=["config-is-text", "config-is-a-file"],
)
def test_a_multipart_create_that_cannot_carry_a_nested_reference_is_refused(
    body: dict[str, Any],
) -> None:
    """Written where the member is text, or a file (it would go out as a JSON
    part holding the file's base64), the create is not built, naming the field."""
    desc = provider({"client_reference_field": "/config/tracking/reference"})
    with pytest.raises(RequestBuildError, match="config"):
        build_create(desc, body=body, idempotency_token="tok", client_reference="op_1")


def _hooked(secret: str) -> Any:
    table = copy.deepcopy(BASE)
    table["create"]["set_body"] = {"/webhook_token": "{webhook_secret}"}
    table["webhooks"] = {
        "scheme": "static_header",
        "options": {"header": "X-Hook-Token"},
        "secrets_env": "WH",
        "job_id": "/id",
    }
    return parse_providers({"providers": {"p": table}}, "config.toml", {"WH": secret})["p"]


def test_the_recorded_boundary_owes_nothing_to_the_webhook_secret_in_the_body() -> None:
    """The Content-Type (its boundary) is recorded with the call's headers: were
    the boundary a digest of the parts, the secret among them, the database would
    hold a digest of the secret beside the rest of the body, which an agent knows
    (a guessable secret is then found offline). The secret is sent, as it must be."""
    built = [
        build_create(
            _hooked(secret), body={"image": IMAGE}, idempotency_token="tok", client_reference="op_1"
        )
        for secret in ("hook-secret-one", "hook-secret-two")
    ]
    recorded = [req.sanitized_headers()["Content-Type"] for req in built]
    assert recorded[0] == recorded[1]
    for req, secret in zip(built, ("hook-secret-one", "hook-secret-two"), strict=True):
        assert req.content is not None
        found = {name: data for name, _f, _t, data in parts(req.content, recorded[0])}
        assert found["webhook_token"] == secret.encode()


def test_a_secret_written_into_a_json_part_leaves_the_boundary_alone() -> None:
    """A path below the top level may now carry {webhook_secret} into a JSON part
    (Speechmatics' notification auth_headers live in `config`): the recorded
    boundary is still derived from the body with the secret redacted."""
    table = copy.deepcopy(BASE)
    table["create"]["set_body"] = {"/config/hook/token": "{webhook_secret}"}
    table["webhooks"] = {
        "scheme": "static_header",
        "options": {"header": "X-Hook-Token"},
        "secrets_env": "WH",
        "job_id": "/id",
    }
    built = []
    for secret in ("hook-secret-one", "hook-secret-two"):
        desc = parse_providers({"providers": {"p": table}}, "config.toml", {"WH": secret})["p"]
        built.append(
            build_create(desc, body={"config": {}}, idempotency_token="t", client_reference="op")
        )
    recorded = [req.sanitized_headers()["Content-Type"] for req in built]
    assert recorded[0] == recorded[1]
    for req, secret in zip(built, ("hook-secret-one", "hook-secret-two"), strict=True):
        assert req.content is not None
        (config,) = [data for name, _f, _t, data in parts(req.content, recorded[0])]
        assert json.loads(config) == {"hook": {"token": secret}}


def test_a_form_in_brackets_carries_objects_and_lists_as_stripe_reads_them() -> None:
    """`create.form_nesting = "brackets"`: Stripe's report run, as its docs and
    libraries write it, goes as `parameters[interval_start]=...`, a list's items
    indexed, our reference written below the top level; before, the body was
    refused unsent ("a form carries text only") and the operation went to a human."""
    desc = provider(
        {
            "encoding": "form",
            "form_nesting": "brackets",
            "client_reference_field": "/metadata/operation",
        }
    )
    body = {
        "report_type": "balance.summary.1",
        "parameters": {"interval_start": 1764547200, "columns": ["category", "net_amount"]},
        "expand": ["result"],
        "livemode": False,
        "skip": None,
        "empty": {},
    }
    req = build_create(desc, body=body, idempotency_token="tok", client_reference="op_1")
    assert req.content is not None
    assert req.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert parse_qsl(req.content.decode()) == [
        ("report_type", "balance.summary.1"),
        ("parameters[interval_start]", "1764547200"),
        ("parameters[columns][0]", "category"),
        ("parameters[columns][1]", "net_amount"),
        ("expand[0]", "result"),
        ("livemode", "false"),
        ("metadata[operation]", "op_1"),
    ]


def test_form_nesting_is_refused_beside_any_encoding_but_a_form() -> None:
    with pytest.raises(ConfigError) as caught:
        provider({"encoding": "multipart", "form_nesting": "brackets"})
    message = str(caught.value)
    assert message.startswith("config.toml: providers.p.create.form_nesting: only with"), message
    with pytest.raises(ConfigError, match=r"create\.form_nesting"):
        provider({"encoding": "form", "form_nesting": "dots"})


def test_a_flat_form_refusing_a_nested_reference_names_brackets() -> None:
    with pytest.raises(ConfigError, match='form_nesting = "brackets"'):
        provider({"encoding": "form", "client_reference_field": "/meta/ref"})


@pytest.mark.parametrize("key", ["a]b", "x[y", "", "[0]"])
def test_a_form_in_brackets_refuses_a_member_name_it_cannot_write(key: str) -> None:
    """Below the top level a name is written between brackets: one holding a bracket
    (`parameters[a]b]`) or empty (`parameters[]`, a list's push in Rack) is read as
    another field than the one recorded, so it is refused unsent, naming it; before,
    it went. A top-level name is written as it is (`"parameters[interval_start]"`,
    the way before form_nesting), as a flat form writes it."""
    desc = provider({"encoding": "form", "form_nesting": "brackets"})
    with pytest.raises(RequestBuildError, match=r"create body field 'parameters\["):
        build_create(
            desc,
            body={"parameters": {"ok": 1, key: "x"}},
            idempotency_token="tok",
            client_reference="op_1",
        )
    req = build_create(
        desc, body={"parameters[a]": "x"}, idempotency_token="tok", client_reference="op_1"
    )
    assert req.content == b"parameters%5Ba%5D=x"


def test_a_form_in_brackets_refuses_a_field_written_twice() -> None:
    """`"parameters[a]"` at the top level beside `{"parameters": {"a": ...}}` is one
    field named twice: the provider reads one of the two values, not necessarily
    the one recorded first. Refused unsent; before, both went."""
    desc = provider({"encoding": "form", "form_nesting": "brackets"})
    with pytest.raises(RequestBuildError, match=r"'parameters\[a\]' is written twice"):
        build_create(
            desc,
            body={"parameters[a]": "1", "parameters": {"a": "2"}},
            idempotency_token="tok",
            client_reference="op_1",
        )


def test_a_form_in_brackets_refuses_a_file() -> None:
    """A file field (`content_base64`) in a form in brackets went as text fields
    `doc[content_base64]=...`: refused unsent, pointing at multipart."""
    desc = provider({"encoding": "form", "form_nesting": "brackets"})
    with pytest.raises(RequestBuildError, match=r"'doc' is a file: .*multipart"):
        build_create(
            desc,
            body={"doc": {"content_base64": "aGk=", "filename": "a.txt"}},
            idempotency_token="tok",
            client_reference="op_1",
        )
