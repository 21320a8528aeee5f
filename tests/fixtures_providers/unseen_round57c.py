"""Apache Airflow DAG runs, Kubernetes Jobs, AWS Batch jobs and GitLab CI pipelines,
each a real app on loopback answering in the shapes their public documentation
gives (tests/integration/test_unseen_round57c.py). Where the docs leave a
behaviour open, the assumption is stated here.

- Airflow 2 stable REST API (Basic auth): `POST /api/v1/dags/{dag}/dagRuns`
  {"dag_run_id", "conf", ...} answers 200 the DAGRun {"dag_run_id", "dag_id",
  "state": "queued", "conf", "run_type": "manual", "logical_date", ...}; an id the
  DAG already has 409 {"detail": "DAGRun with DAG ID: '…' and DAGRun ID: '…' already
  exists", "status": 409, "title": "Conflict", "type": ".../AlreadyExists"}. `GET
  .../dagRuns/{id}` the DAGRun, state queued | running | success | failed (no
  reason: a failure is told by the task instances); an unknown id 404 {"title":
  "DAGRun not found", ...}. `PATCH .../dagRuns/{id}` {"state": "failed" | "success"
  | "queued"} sets it whatever the run's state (a finished run too) and answers the
  DAGRun. `GET .../taskInstances/{task}/xcomEntries/{key}` {"key", "value" (the
  value as text), "task_id", "dag_id", "map_index", "timestamp", "execution_date"}.
- Kubernetes batch/v1 (Bearer): `POST /apis/batch/v1/namespaces/{ns}/jobs` a Job
  manifest answers 201 the Job (status {}); a name in use 409 Status
  AlreadyExists. `GET .../jobs/{name}` the Job: status.active/ready/succeeded/
  failed counts, startTime, completionTime, and conditions [{type, status,
  reason, message, lastProbeTime, lastTransitionTime}]: SuccessCriteriaMet then
  Complete (1.31+), FailureTarget then Failed (BackoffLimitExceeded), Suspended
  (status "False" once resumed, kept). `DELETE .../jobs/{name}?propagationPolicy=`
  200 Status Success, the Job gone (404 Status NotFound) from then on.
- AWS Batch (REST-JSON, SigV4 "batch", checked with botocore): `POST
  /v1/submitjob` {jobName, jobQueue, jobDefinition, ...} answers {jobArn, jobName,
  jobId}; `POST /v1/describejobs` {"jobs": [ids]} answers {"jobs": [JobDetail]},
  an id it does not know left out; `POST /v1/terminatejob` {jobId, reason} answers
  {} and ends the job FAILED, statusReason the reason given. `POST /v1/listjobs`
  {jobQueue, filters: [{name: "JOB_NAME", values}]} {"jobSummaryList": [...]}.
  Errors 400 {"message"} with x-amzn-ErrorType ClientException.
- GitLab (PRIVATE-TOKEN): `POST /api/v4/projects/{id}/pipeline?ref=main`
  {"variables": [{key, value}]} answers 201 the pipeline (its name from the
  JOBWARDEN_OPERATION variable: workflow:name, assumed set so in .gitlab-ci.yml);
  `GET .../pipelines/{pid}` status created | pending | running | success | failed
  | canceling | canceled ...; `POST .../pipelines/{pid}/cancel` 200 the pipeline
  (canceling; a finished one as it is); `GET .../pipelines?name=` a JSON array;
  `GET .../pipelines/{pid}/test_report`. The pipeline webhook: X-Gitlab-Token
  (the secret as set), X-Gitlab-Event-UUID, {"object_kind": "pipeline",
  "object_attributes": {id, name, status, ...}, "builds": [...]}.

Scripts: Airflow's in `conf.script`, Kubernetes' in the Job's label `script`,
Batch's in `parameters.script`, GitLab's in the fixture's `script` (the next
pipeline's): "fail", "slow" (runs until the test ends it), anything else
completes after a few reads.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.aws import signature_refusal
from tests.fixtures_providers.common import json_response, read_json
from tests.fixtures_providers.unseen_media import _Jobs
from tests.fixtures_providers.unseen_round53b import _advance, _created

# --- Airflow -----------------------------------------------------------------------

AF_BASIC = "YWlyZmxvdzphaXJmbG93LXRlc3QtcGFzc3dvcmQ="  # airflow:airflow-test-password
AF_DAG = "nightly_etl"
AF_ERRORS = "https://airflow.apache.org/docs/apache-airflow/2.10.3/stable-rest-api-ref.html"
AF_VALUE = "{'rows': 3, 'table': 'sales_daily'}"


class AirflowFixture(_Jobs):
    """`date_taken`: the DAG holds a run of the logical date every create names
    (made elsewhere): each create is refused 409 Conflict, as a taken id is."""

    def __init__(self, *, date_taken: bool = False, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.date_taken = date_taken
        self.patches: list[dict[str, Any]] = []
        self.xcom_reads = 0
        self.refused_creates = 0

    def app(self) -> Starlette:
        runs = "/api/v1/dags/{dag}/dagRuns"
        return Starlette(
            routes=[
                Route(runs, self.create, methods=["POST"]),
                Route(runs + "/{rid}", self.get, methods=["GET"]),
                Route(runs + "/{rid}", self.patch, methods=["PATCH"]),
                Route(
                    runs + "/{rid}/taskInstances/{task}/xcomEntries/{key}",
                    self.xcom,
                    methods=["GET"],
                ),
            ]
        )

    @staticmethod
    def _error(status: int, title: str, detail: str, kind: str) -> Response:
        body = {
            "detail": detail,
            "status": status,
            "title": title,
            "type": f"{AF_ERRORS}#section/Errors/{kind}",
        }
        return json_response(body, status)

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Basic {AF_BASIC}":
            return self._error(401, "Unauthorized", "", "Unauthenticated")
        if request.path_params["dag"] != AF_DAG:
            return self._error(404, "DAG not found", "", "NotFound")
        return None

    def _missing(self, rid: str) -> Response:
        detail = f"DAGRun with DAG ID: '{AF_DAG}' and DagRun ID: '{rid}' not found"
        return self._error(404, "DAGRun not found", detail, "NotFound")

    @staticmethod
    def run(job: dict[str, Any]) -> dict[str, Any]:
        ended = job["state"] in ("success", "failed")
        return {
            "dag_run_id": job["id"],
            "dag_id": AF_DAG,
            "conf": job["body"].get("conf", {}),
            "state": job["state"],
            "run_type": "manual",
            "external_trigger": True,
            "logical_date": "2026-12-06T10:00:00+00:00",
            "execution_date": "2026-12-06T10:00:00+00:00",
            "data_interval_start": "2026-12-06T10:00:00+00:00",
            "data_interval_end": "2026-12-06T10:00:00+00:00",
            "start_date": None if job["state"] == "queued" else "2026-12-06T10:00:01+00:00",
            "end_date": "2026-12-06T10:05:00+00:00" if ended else None,
            "last_scheduling_decision": None,
            "note": job["body"].get("note"),
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        body = await read_json(request)
        rid = body.get("dag_run_id") if isinstance(body, dict) else None
        if not rid:
            return self._error(400, "Bad Request", "dag_run_id is required here", "BadRequest")
        if rid in self.jobs:
            detail = f"DAGRun with DAG ID: '{AF_DAG}' and DAGRun ID: '{rid}' already exists"
            return self._error(409, "Conflict", detail, "AlreadyExists")
        if self.date_taken:
            self.refused_creates += 1
            date = body.get("logical_date")
            detail = (
                f"DAGRun with DAG ID: '{AF_DAG}' and DAGRun logical date: '{date}' already exists"
            )
            return self._error(409, "Conflict", detail, "AlreadyExists")
        script = (body.get("conf") or {}).get("script")
        self.jobs[rid] = {"id": rid, "body": body, "state": "queued", "reads": 0, "script": script}
        await _created(self)
        return json_response(self.run(self.jobs[rid]))

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._missing(request.path_params["rid"])
        self.reads += 1
        _advance(job, ["queued", "running"], "failed" if job["script"] == "fail" else "success")
        return json_response(self.run(job))

    async def patch(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        if job is None:
            return self._missing(request.path_params["rid"])
        body = await read_json(request)
        self.patches.append(body)
        state = body.get("state") if isinstance(body, dict) else None
        if state not in ("success", "failed", "queued"):
            detail = f"'{state}' is not one of ['success', 'failed', 'queued'] - 'state'"
            return self._error(400, "Bad Request", detail, "BadRequest")
        self.cancels.append((job["id"], job["state"]))
        job["state"] = state
        return json_response(self.run(job))

    async def xcom(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self.jobs.get(request.path_params["rid"])
        task, key = request.path_params["task"], request.path_params["key"]
        if job is None or job["state"] != "success" or task != "report" or key != "return_value":
            return self._error(404, "XCom entry not found", "", "NotFound")
        self.xcom_reads += 1
        return json_response(
            {
                "key": key,
                "value": AF_VALUE,
                "task_id": task,
                "dag_id": AF_DAG,
                "map_index": -1,
                "timestamp": "2026-12-06T10:04:59+00:00",
                "execution_date": "2026-12-06T10:00:00+00:00",
            }
        )

    def finish(self, rid: str) -> None:
        self.jobs[rid]["state"] = "success"


# --- Kubernetes --------------------------------------------------------------------

K8S_TOKEN = "eyJhbGciOiJSUzI1NiJ9.k8s-test-service-account-token"
K8S_NS = "etl"
K8S_FAILURE = "Job has reached the specified backoff limit"


def _status(code: int, reason: str, message: str, name: str | None = None) -> Response:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 300 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if name is not None:
        body["details"] = {"name": name, "group": "batch", "kind": "jobs"}
    return json_response(body, code)


def _condition(kind: str, reason: str, message: str, status: str = "True") -> dict[str, Any]:
    at = "2026-12-06T10:03:00Z"
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": at,
        "lastTransitionTime": at,
    }


class KubernetesJobsFixture(_Jobs):
    """`suspended_first`: each Job starts suspended, is read so once, then resumed
    (its Suspended condition kept, status "False", as the Job controller keeps it)."""

    def __init__(self, *, suspended_first: bool = False, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.suspended_first = suspended_first
        self.deletes: list[str] = []

    def app(self) -> Starlette:
        jobs = "/apis/batch/v1/namespaces/{ns}/jobs"
        return Starlette(
            routes=[
                Route(jobs, self.create, methods=["POST"]),
                Route(jobs + "/{name}", self.get, methods=["GET"]),
                Route(jobs + "/{name}", self.delete, methods=["DELETE"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("authorization") != f"Bearer {K8S_TOKEN}":
            return _status(401, "Unauthorized", "Unauthorized")
        if request.path_params["ns"] != K8S_NS:
            return _status(403, "Forbidden", "cannot create jobs in this namespace")
        return None

    @staticmethod
    def _missing(name: str) -> Response:
        return _status(404, "NotFound", f'jobs.batch "{name}" not found', name)

    def resource(self, job: dict[str, Any]) -> dict[str, Any]:
        manifest = job["manifest"]
        state = job["state"]
        status: dict[str, Any] = {}
        conditions: list[dict[str, Any]] = []
        if job.get("was_suspended"):
            suspended = state == "suspended"
            conditions.append(
                _condition(
                    "Suspended",
                    "JobSuspended" if suspended else "JobResumed",
                    "Job suspended" if suspended else "Job resumed",
                    "True" if suspended else "False",
                )
            )
        if state in ("running", "failing", "failed", "complete"):
            status["startTime"] = "2026-12-06T10:00:01Z"
        if state == "running":
            status |= {"active": 1, "ready": 1, "terminating": 0}
        if state in ("failing", "failed"):
            status["failed"] = 4
            conditions.append(_condition("FailureTarget", "BackoffLimitExceeded", K8S_FAILURE))
            status["terminating"] = 1 if state == "failing" else 0
        if state == "failed":
            conditions.append(_condition("Failed", "BackoffLimitExceeded", K8S_FAILURE))
        if state == "complete":
            reached = "Reached expected number of succeeded pods"
            conditions.append(_condition("SuccessCriteriaMet", "CompletionsReached", reached))
            conditions.append(_condition("Complete", "CompletionsReached", reached))
            status |= {"succeeded": 1, "completionTime": "2026-12-06T10:03:00Z", "ready": 0}
        if conditions:
            status["conditions"] = conditions
        status["uncountedTerminatedPods"] = {}
        return {
            "kind": "Job",
            "apiVersion": "batch/v1",
            "metadata": {
                **manifest.get("metadata", {}),
                "namespace": K8S_NS,
                "uid": job["uid"],
                "resourceVersion": str(1000 + job["reads"]),
                "creationTimestamp": "2026-12-06T10:00:00Z",
            },
            "spec": {
                "completions": 1,
                "parallelism": 1,
                "backoffLimit": 3,
                "suspend": state == "suspended",
                **manifest.get("spec", {}),
            },
            "status": status,
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        manifest = await read_json(request)
        name = ((manifest or {}).get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            return _status(422, "Invalid", "Job.batch is invalid: metadata.name: Required value")
        if name in self.jobs:
            return _status(409, "AlreadyExists", f'jobs.batch "{name}" already exists', name)
        labels = manifest["metadata"].get("labels") or {}
        state = "suspended" if self.suspended_first else "pending"
        self.jobs[name] = {
            "id": name,
            "manifest": manifest,
            "uid": str(uuid.uuid4()),
            "state": state,
            "was_suspended": self.suspended_first,
            "reads": 0,
            "script": labels.get("script"),
        }
        await _created(self)
        return json_response(self.resource(self.jobs[name]), 201)

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        name = request.path_params["name"]
        job = self.jobs.get(name)
        if job is None:
            return self._missing(name)
        self.reads += 1
        if job["state"] == "suspended" and not job["reads"]:
            job["reads"] += 1  # read once suspended, then resumed
            return json_response(self.resource(job))
        if job["state"] == "suspended":
            job["state"] = "pending"
        failing = job["script"] == "fail"
        steps = ["pending", "running", "failing"] if failing else ["pending", "running"]
        _advance(job, steps, "failed" if failing else "complete")
        return json_response(self.resource(job))

    async def delete(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        name = request.path_params["name"]
        self.deletes.append(request.query_params.get("propagationPolicy", ""))
        job = self.jobs.pop(name, None)
        if job is None:
            return self._missing(name)
        self.cancels.append((name, job["state"]))
        return _status(200, "", "", name)

    def finish(self, name: str) -> None:
        self.jobs[name]["state"] = "complete"


# --- AWS Batch ---------------------------------------------------------------------

BATCH_KEYS = {"AKIDBATCHEXAMPLE0001": "batch/Secret+Access+Key/EXAMPLE000000000000000"}
BATCH_REGION, BATCH_SERVICE = "us-east-1", "batch"
BATCH_ACCOUNT = "123456789012"
BATCH_EXITED = "Essential container in task exited"
BATCH_LOGS = "nightly-etl/default/0a1b2c3d4e5f"


def _batch_error(message: str, kind: str = "ClientException", status: int = 400) -> Response:
    return json_response({"message": message}, status, headers={"x-amzn-ErrorType": kind})


class AwsBatchFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.describes: list[list[str]] = []
        self.terminates: list[dict[str, Any]] = []
        self.list_bodies: list[dict[str, Any]] = []

    def new_id(self) -> str:
        return f"0b1c2d3e-4f50-4a6b-8c7d-{len(self.jobs) + 1:012d}"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/submitjob", self.submit, methods=["POST"]),
                Route("/v1/describejobs", self.describe, methods=["POST"]),
                Route("/v1/terminatejob", self.terminate, methods=["POST"]),
                Route("/v1/listjobs", self.list_jobs, methods=["POST"]),
            ]
        )

    async def _body(self, request: Request) -> tuple[dict[str, Any] | None, Response | None]:
        raw = await request.body()
        refusal = signature_refusal(request, raw, BATCH_KEYS, BATCH_REGION, BATCH_SERVICE)
        if refusal is not None:
            return None, _batch_error(refusal[1], refusal[0], 403)
        body = json.loads(raw or b"{}")
        if not isinstance(body, dict):
            return None, _batch_error("Request body is not an object")
        return body, None

    def detail(self, job: dict[str, Any]) -> dict[str, Any]:
        body = job["body"]
        state = job["state"]
        container: dict[str, Any] = {
            "image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/etl:latest",
            "command": ["python", "etl.py"],
            "vcpus": 1,
            "memory": 2048,
        }
        out: dict[str, Any] = {
            "jobArn": f"arn:aws:batch:us-east-1:{BATCH_ACCOUNT}:job/{job['id']}",
            "jobName": body["jobName"],
            "jobId": job["id"],
            "jobQueue": f"arn:aws:batch:us-east-1:{BATCH_ACCOUNT}:job-queue/{body['jobQueue']}",
            "status": state,
            "attempts": [],
            "createdAt": 1765015200000,
            "dependsOn": [],
            "jobDefinition": f"arn:aws:batch:us-east-1:{BATCH_ACCOUNT}:job-definition/"
            f"{body['jobDefinition']}:1",
            "parameters": body.get("parameters", {}),
            "container": container,
            "tags": {},
            "platformCapabilities": ["EC2"],
        }
        if state in ("STARTING", "RUNNING", "SUCCEEDED", "FAILED"):
            out["startedAt"] = 1765015260000
            container["logStreamName"] = BATCH_LOGS
        if state in ("SUCCEEDED", "FAILED"):
            out["stoppedAt"] = 1765015500000
            out["statusReason"] = job.get("reason") or BATCH_EXITED
            if "reason" not in job:
                container["exitCode"] = 0 if state == "SUCCEEDED" else 1
        return out

    async def submit(self, request: Request) -> Response:
        body, refused = await self._body(request)
        if refused is not None:
            return refused
        assert body is not None
        missing = [k for k in ("jobName", "jobQueue", "jobDefinition") if not body.get(k)]
        if missing:
            return _batch_error(f"{missing[0]} is required")
        jid = self.new_id()
        script = (body.get("parameters") or {}).get("script")
        self.jobs[jid] = {
            "id": jid,
            "body": body,
            "state": "SUBMITTED",
            "reads": 0,
            "script": script,
        }
        await _created(self)
        return json_response(
            {
                "jobArn": f"arn:aws:batch:us-east-1:{BATCH_ACCOUNT}:job/{jid}",
                "jobName": body["jobName"],
                "jobId": jid,
            }
        )

    async def describe(self, request: Request) -> Response:
        body, refused = await self._body(request)
        if refused is not None:
            return refused
        assert body is not None
        ids = body.get("jobs")
        if not isinstance(ids, list) or not ids or len(ids) > 100:
            return _batch_error("jobs must name 1 to 100 job ids")
        self.describes.append(ids)
        found = []
        for jid in ids:
            job = self.jobs.get(jid)
            if job is None:
                continue  # an unknown id is left out of the list
            self.reads += 1
            steps = ["SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING"]
            _advance(job, steps, "FAILED" if job["script"] == "fail" else "SUCCEEDED")
            found.append(self.detail(job))
        return json_response({"jobs": found})

    async def terminate(self, request: Request) -> Response:
        body, refused = await self._body(request)
        if refused is not None:
            return refused
        assert body is not None
        self.terminates.append(body)
        job = self.jobs.get(str(body.get("jobId")))
        if job is None or not body.get("reason"):
            return _batch_error("jobId and reason are required; the job must exist")
        self.cancels.append((job["id"], job["state"]))
        if job["state"] not in ("SUCCEEDED", "FAILED"):
            job["state"] = "FAILED"
            job["reason"] = body["reason"]
        return json_response({})

    async def list_jobs(self, request: Request) -> Response:
        body, refused = await self._body(request)
        if refused is not None:
            return refused
        assert body is not None
        self.list_bodies.append(body)
        names: list[str] = []
        for f in body.get("filters") or []:
            if f.get("name") == "JOB_NAME":
                names = f.get("values") or []
        if not body.get("jobQueue") or not names:
            return _batch_error("jobQueue and a JOB_NAME filter are required here")
        found = [
            {
                "jobArn": f"arn:aws:batch:us-east-1:{BATCH_ACCOUNT}:job/{j['id']}",
                "jobId": j["id"],
                "jobName": j["body"]["jobName"],
                "createdAt": 1765015200000,
                "status": j["state"],
            }
            for j in self.jobs.values()
            if j["body"]["jobName"] in names and j["body"]["jobQueue"] == body["jobQueue"]
        ]
        return json_response({"jobSummaryList": found})

    def finish(self, jid: str) -> None:
        self.jobs[jid]["state"] = "SUCCEEDED"


# --- GitLab ------------------------------------------------------------------------

GL_TOKEN = "glpat-gitlab-test-token-0123"
GL_HOOK_TOKEN = "gitlab-hook-secret-token-0123456789"
GL_PROJECT = 42
GL_REFS = ("main",)


def gl_report(failed: int = 0) -> dict[str, Any]:
    cases = [
        {
            "status": "failed" if i < failed else "success",
            "name": f"test_{i}",
            "classname": "etl.tests",
            "execution_time": 0.1,
            "system_output": None,
        }
        for i in range(3)
    ]
    counts = {
        "total_count": 3,
        "success_count": 3 - failed,
        "failed_count": failed,
        "skipped_count": 0,
        "error_count": 0,
    }
    suite = {"name": "pytest", "total_time": 0.3, **counts, "test_cases": cases}
    return {"total_time": 0.3, **counts, "test_suites": [suite]}


class GitlabFixture(_Jobs):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.script: str | None = None  # the next pipeline's
        self.list_queries: list[dict[str, str]] = []
        self.report_reads = 0

    def new_id(self) -> str:
        return str(1_200_000 + len(self.jobs) + 1)

    def app(self) -> Starlette:
        root = "/api/v4/projects/{pid:int}"
        return Starlette(
            routes=[
                Route(root + "/pipeline", self.create, methods=["POST"]),
                Route(root + "/pipelines", self.list_pipelines, methods=["GET"]),
                Route(root + "/pipelines/{id}", self.get, methods=["GET"]),
                Route(root + "/pipelines/{id}/cancel", self.cancel, methods=["POST"]),
                Route(root + "/pipelines/{id}/test_report", self.report, methods=["GET"]),
            ]
        )

    def _refused(self, request: Request) -> Response | None:
        if request.headers.get("private-token") != GL_TOKEN:
            return json_response({"message": "401 Unauthorized"}, 401)
        if request.path_params["pid"] != GL_PROJECT:
            return json_response({"message": "404 Project Not Found"}, 404)
        return None

    @staticmethod
    def pipeline(job: dict[str, Any]) -> dict[str, Any]:
        state = job["state"]
        pid = int(job["id"])
        return {
            "id": pid,
            "iid": pid - 1_200_000,
            "project_id": GL_PROJECT,
            "name": job["name"],
            "sha": "a91957a858320c0e17f3a0eca7cfacbff50ea29a",
            "ref": job["ref"],
            "status": state,
            "source": "api",
            "created_at": "2026-12-06T10:00:00.000Z",
            "updated_at": "2026-12-06T10:03:00.000Z",
            "web_url": f"https://gitlab.example.com/data/etl/-/pipelines/{pid}",
            "before_sha": "0000000000000000000000000000000000000000",
            "tag": False,
            "yaml_errors": None,
            "user": {"id": 7, "username": "jobwarden-bot", "name": "jobwarden"},
            "started_at": None if state in ("created", "pending") else "2026-12-06T10:00:05.000Z",
            "finished_at": "2026-12-06T10:03:00.000Z"
            if state in ("success", "failed", "canceled")
            else None,
            "committed_at": None,
            "duration": None,
            "queued_duration": 0.5,
            "coverage": None,
            "detailed_status": {"icon": f"status_{state}", "text": state, "label": state},
        }

    async def create(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        ref = request.query_params.get("ref")
        if not ref:
            return json_response({"error": "ref is missing"}, 400)
        if ref not in GL_REFS:
            return json_response({"message": {"base": ["Reference not found"]}}, 400)
        body = await read_json(request) or {}
        variables = {v["key"]: v["value"] for v in body.get("variables") or []}
        pid = self.new_id()
        self.jobs[pid] = {
            "id": pid,
            "ref": ref,
            "body": body,
            # .gitlab-ci.yml: workflow: { name: "$JOBWARDEN_OPERATION" }
            "name": variables.get("JOBWARDEN_OPERATION"),
            "state": "created",
            "reads": 0,
            "script": self.script,
        }
        await _created(self)
        return json_response(self.pipeline(self.jobs[pid]), 201)

    async def list_pipelines(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        query = dict(request.query_params)
        self.list_queries.append(query)
        found = [
            self.pipeline(j)
            for j in sorted(self.jobs.values(), key=lambda j: -int(j["id"]))
            if ("name" not in query or j["name"] == query["name"])
            and ("ref" not in query or j["ref"] == query["ref"])
        ]
        headers = {"X-Page": "1", "X-Per-Page": "20", "X-Next-Page": "", "X-Total-Pages": "1"}
        return json_response(found, headers=headers)

    def _job(self, request: Request) -> dict[str, Any] | None:
        return self.jobs.get(request.path_params["id"])

    async def get(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None:
            return json_response({"message": "404 Not found"}, 404)
        self.reads += 1
        if job["state"] == "canceling":
            job["state"] = "canceled"
        _advance(
            job,
            ["created", "pending", "running"],
            "failed" if job["script"] == "fail" else "success",
        )
        return json_response(self.pipeline(job))

    async def cancel(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None:
            return json_response({"message": "404 Not found"}, 404)
        self.cancels.append((job["id"], job["state"]))
        if job["state"] in ("created", "pending", "running"):
            job["state"] = "canceling"
        return json_response(self.pipeline(job))

    async def report(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        job = self._job(request)
        if job is None:
            return json_response({"message": "404 Not found"}, 404)
        self.report_reads += 1
        return json_response(gl_report(1 if job["state"] == "failed" else 0))

    def finish(self, pid: str) -> None:
        self.jobs[pid]["state"] = "success"

    async def deliver(
        self,
        url: str,
        pid: str,
        *,
        token: str = GL_HOOK_TOKEN,
        status: str | None = None,
        key: str | None = None,
    ) -> httpx.Response:
        """The pipeline event GitLab sends for `pid` (its status as read now, or
        `status`), with the webhook's secret token as set; `key`: a retry's."""
        job = self.jobs[pid]
        attributes = self.pipeline(job) | {"status": status or job["state"]}
        event = {
            "object_kind": "pipeline",
            "object_attributes": {
                k: attributes[k]
                for k in ("id", "iid", "name", "ref", "tag", "sha", "source", "status")
            }
            | {
                "detailed_status": attributes["status"],
                "stages": ["test"],
                "variables": job["body"].get("variables") or [],
                "url": attributes["web_url"],
            },
            "merge_request": None,
            "user": {"id": 7, "name": "jobwarden", "username": "jobwarden-bot"},
            "project": {"id": GL_PROJECT, "name": "etl", "path_with_namespace": "data/etl"},
            "builds": [
                {
                    "id": 9000 + int(pid) % 1000,
                    "stage": "test",
                    "name": "pytest",
                    "status": attributes["status"],
                    "failure_reason": "script_failure" if job["state"] == "failed" else None,
                }
            ],
        }
        headers = {
            "content-type": "application/json",
            "x-gitlab-event": "Pipeline Hook",
            "x-gitlab-token": token,
            "x-gitlab-event-uuid": str(uuid.uuid4()),
            # the same on every retry of one event (GitLab 17.4+)
            "idempotency-key": key or str(uuid.uuid4()),
            "x-gitlab-instance": "https://gitlab.example.com",
            "user-agent": "GitLab/17.6.0",
        }
        async with httpx.AsyncClient() as client:
            return await client.post(url, content=json.dumps(event), headers=headers)
