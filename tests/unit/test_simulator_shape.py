"""ApiShape: the simulator's canonical bodies in another API's words, and back."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from shared.simulator import SimulatorSettings
from shared.simulator.payloads import result_document, status_body
from shared.simulator.scripts import JobParams, ResultShape, Script
from shared.simulator.shape import ApiShape, ShapeError
from shared.simulator.state import Job

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "acme_exports" / "shape.toml"

CANONICAL: dict[str, Any] = {
    "job_id": "job_1",
    "state": "succeeded",
    "progress": {"completed": 3, "total": 3},
    "counts": {"total": 3, "succeeded": 2, "failed": 1},
    "error": None,
}


def test_fields_move_states_rename_and_emptied_objects_go() -> None:
    shape = ApiShape(
        fields={"job_id": "id", "progress.completed": "stats.done", "progress.total": "stats.all"},
        states={"succeeded": "COMPLETED"},
    )
    out = shape.out(CANONICAL)
    assert out == {
        "id": "job_1",
        "state": "COMPLETED",
        "stats": {"done": 3, "all": 3},
        "counts": {"total": 3, "succeeded": 2, "failed": 1},
        "error": None,  # a null moves like any value, and stays when unmapped
    }
    assert CANONICAL["progress"] == {"completed": 3, "total": 3}  # the caller's body is intact


def test_two_fields_can_swap_names() -> None:
    shape = ApiShape(fields={"job_id": "state", "state": "job_id"})
    assert shape.out({"job_id": "j", "state": "running"}) == {"state": "j", "job_id": "running"}


def test_an_absent_field_is_not_invented() -> None:
    assert ApiShape(fields={"result_url": "output.url"}).out({"job_id": "j"}) == {"job_id": "j"}


def test_webhook_types_follow_the_state_words() -> None:
    shape = ApiShape(states={"failed": "ERRORED"}, fields={"state": "status"})
    assert shape.out({"type": "job.failed", "state": "failed"}) == {
        "type": "job.ERRORED",
        "status": "ERRORED",
    }


def test_into_undoes_out_for_create_bodies() -> None:
    shape = ApiShape(fields={"client_reference": "metadata.reference", "webhook_url": "hook"})
    sent = {"metadata": {"reference": "op_1"}, "hook": "http://x/", "script": "success"}
    assert shape.into(sent) == {
        "client_reference": "op_1",
        "webhook_url": "http://x/",
        "script": "success",
    }
    assert sent["metadata"] == {"reference": "op_1"}  # the request's cached body is untouched


@pytest.mark.parametrize(
    ("shape", "headers", "body", "key"),
    [
        (ApiShape(), {"Idempotency-Key": "k1"}, {}, "k1"),
        (
            ApiShape(idempotency_header=None, idempotency_field="req.token"),
            {},
            {"req": {"token": "k2"}},
            "k2",
        ),
        (ApiShape(idempotency_header=None, idempotency_field="token"), {}, {"token": 7}, None),
        (ApiShape(idempotency_header=None), {"Idempotency-Key": "k3"}, {}, None),
    ],
    ids=["header", "body_field", "non_string", "none"],
)
def test_the_key_is_read_where_the_shape_carries_it(
    shape: ApiShape, headers: dict[str, str], body: Any, key: str | None
) -> None:
    assert shape.idempotency_key(headers, body) == key


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"jobs_path": "v1/jobs"}, "jobs_path"),
        ({"jobs_path": "/v1/jobs/"}, "jobs_path"),
        ({"cancel_method": "PATCH"}, "cancel_method"),
        ({"idempotency_header": "K", "idempotency_field": "k"}, "not both"),
        ({"states": {"done": "DONE"}}, "unknown states"),
        ({"states": {"succeeded": "OK", "partially_succeeded": "OK"}}, "word of its own"),
        ({"states": {"running": "succeeded"}}, "word of its own"),
        ({"states": {"succeeded": 1}}, "non-empty string"),
        ({"fields": {"job_id": "x", "state": "x.y"}}, "nest inside"),
        ({"fields": {"progress": "p", "progress.completed": "done"}}, "nest inside"),
        ({"fields": "x"}, "must be a table"),
        ({"jobs_path": 5}, "expected a string"),
        ({"jobs_path": "/api?x=1"}, "jobs_path"),
        ({"request_id_header": "Acme Request Id"}, "HTTP token"),
        ({"idempotency_header": "", "idempotency_field": "a..b"}, "dotted names"),
        ({"csv_delimiter": '"'}, "quote"),
        ({"csv_columns": {"status": "output"}}, "two columns one name"),
        ({"fields": {"job_id": "id", "state": "id"}}, "same provider field"),
        ({"fields": {"job_id": "a..b"}}, "dotted names"),
        ({"csv_columns": {"row": "r"}}, "csv_columns"),
        ({"csv_delimiter": ";;"}, "one character"),
        ({"result_format": "xml"}, "result_format"),
        ({"job_path": "/x"}, "unknown shape keys"),
    ],
)
def test_an_incoherent_shape_is_refused_at_start_up(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        ApiShape.from_mapping(table)


def test_the_example_shape_file_loads_with_its_signing() -> None:
    settings = SimulatorSettings().with_shape_file(EXAMPLE)
    assert settings.shape.jobs_path == "/api/v2/exports"
    assert settings.shape.idempotency_header is None
    assert settings.shape.idempotency_field == "request_token"
    assert settings.webhook_scheme == "hmac"
    assert settings.webhook_options["signature_header"] == "Acme-Signature"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("jobs_path = ", "shape.toml"),
        ('[webhooks]\nscheme = "hmac"\nsecret = "x"', "takes scheme"),
        ('[webhooks]\nscheme = "hmac"\noptions = 3', "takes scheme|must be a table"),
        ('[webhooks]\nscheme = "nonsense"', "nonsense"),
        ('webhooks = "x"', "must be a table"),
        ("[fields]\njob_id = 1", "shape.toml: \\[fields\\] job_id"),
    ],
)
def test_a_bad_shape_file_gets_one_clear_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "shape.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        SimulatorSettings().with_shape_file(path)


def _job(result_format: ResultShape, failed: int = 0) -> Job:
    params = JobParams(
        duration=0.0, min_polls=0, total=3, failed=failed, result_format=result_format
    )
    job = Job("job_x", Script.PARTIAL if failed else Script.SUCCESS, params, 0.0, 0.0)
    job.settle(1.0)
    return job


def test_csv_uses_the_shapes_delimiter_and_column_names() -> None:
    shape = ApiShape(csv_delimiter=";", csv_columns={"status": "outcome", "index": "row"})
    body, media = result_document(_job(ResultShape.CSV, failed=1), shape)
    lines = body.decode().splitlines()
    assert media == "text/csv" and lines[0] == "row;output;outcome;message"
    assert len(lines) == 4 and sum(";failed;" in line for line in lines) == 1


def test_binary_is_opaque_bytes_whose_sha256_the_status_publishes() -> None:
    job = _job(ResultShape.BINARY)
    body, media = result_document(job)
    assert media == "application/octet-stream" and len(body) == 3 * 32
    assert status_body(job, 1.0)["result_sha256"] == hashlib.sha256(body).hexdigest()


def test_the_simulator_command_refuses_a_bad_shape_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shared.cli.main import main

    path = tmp_path / "shape.toml"
    path.write_text('cancel_method = "PATCH"\n')
    assert main(["simulator", "--port", "0", "--shape", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jobwarden simulator: ") and "cancel_method" in err
    assert "\n" not in err and "Traceback" not in err
