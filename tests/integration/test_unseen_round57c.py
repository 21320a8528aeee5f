"""Apache Airflow DAG runs, Kubernetes Jobs, AWS Batch jobs and GitLab CI pipelines,
described in TOML as a new user would (tests/fixtures_providers/unseen/:
airflow_dag_runs, k8s_jobs, aws_batch, gitlab_pipelines) and driven through the
real reconciler (and receiver) against fakes on loopback
(tests/fixtures_providers/unseen_round57c.py): success with the result collected,
failure with its reason, cancel, a lost create answer, and each API's own edge:
Airflow's dag_run_id of ours and its 409 Conflict, its cancel that is a PATCH to
"failed" (and that would turn a finished run failed); Kubernetes' end told by a
condition in a list, FailureTarget before Failed, a Suspended condition kept
"False" once resumed, a DELETE that removes the Job; AWS Batch's SigV4 REST-JSON,
its state inside a list, an unknown id answered by an empty list, a terminate
that ends the job FAILED with our reason, a lost submit found by ListJobs (a POST
naming the queue and the job name in its body); GitLab's pipeline named after our
operation, its X-Gitlab-Token webhook (a forged one refused).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from shared.ledger.states import LocalState
from tests.fixtures_providers.common import hang
from tests.fixtures_providers.described import ENDS, described, reason
from tests.fixtures_providers.rig import preset_rig
from tests.fixtures_providers.unseen_round57c import (
    AF_BASIC,
    AF_VALUE,
    BATCH_EXITED,
    BATCH_KEYS,
    BATCH_LOGS,
    GL_HOOK_TOKEN,
    GL_TOKEN,
    K8S_FAILURE,
    K8S_TOKEN,
    AirflowFixture,
    AwsBatchFixture,
    GitlabFixture,
    KubernetesJobsFixture,
    gl_report,
)

S = LocalState


# --- Airflow -----------------------------------------------------------------------

AF_ENV = {"AIRFLOW_BASIC": AF_BASIC}


def dag_run(script: str | None = None) -> dict[str, Any]:
    conf = {"day": "2026-12-05"} | ({"script": script} if script else {})
    return {"conf": conf, "note": "nightly from jobwarden"}


def airflow(pool: Any, tmp_path: Path, fx: AirflowFixture, **over: Any) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="airflow_dag_runs",
        env=AF_ENV,
        overrides=described("airflow_dag_runs", **over),
    )


async def test_airflow_a_run_of_our_id_is_collected_with_its_xcom(
    pool: Any, tmp_path: Path
) -> None:
    fx = AirflowFixture()
    async with airflow(pool, tmp_path, fx) as r:
        op_id = await r.submit(dag_run())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        run = fx.only()
        assert run["id"].startswith("jw-idem_")
        assert (await r.op(op_id)).remote_job_id == run["id"]
        assert {"running", "success"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert (kept["value"], kept["task_id"]) == (AF_VALUE, "report")


async def test_airflow_a_failed_run_is_failed_without_a_reason_to_give(
    pool: Any, tmp_path: Path
) -> None:
    """A DAG run names no reason for its failure: failed, said unexplained."""
    fx = AirflowFixture()
    async with airflow(pool, tmp_path, fx) as r:
        op_id = await r.submit(dag_run("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "failed" in (await reason(r, op_id))
        assert fx.xcom_reads == 0


async def test_airflow_a_lost_create_is_read_back_by_the_id_we_chose(
    pool: Any, tmp_path: Path
) -> None:
    """The first POST made the run, its answer lost: the resend is refused 409
    Conflict (already_exists_codes) and the run read back by our id, adopted."""
    fx = AirflowFixture(lose_first_create=True)
    async with airflow(pool, tmp_path, fx) as r:
        op_id = await r.submit(dag_run())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert len(fx.jobs) == 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_airflow_a_cancel_sets_the_run_failed_and_is_recorded_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    """Airflow stops a run by PATCH {"state": "failed"}, after which it reads failed,
    as one that failed on its own (cancel.ends_failed): once the PATCH was taken,
    that read is the run cancelled by us. Before, every confirmed cancel of a
    DAG run ended `failed`, a failure the run never had."""
    fx = AirflowFixture()
    async with airflow(pool, tmp_path, fx) as r:
        op_id = await r.submit(dag_run("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        end = await r.settle(op_id, ENDS)
        assert fx.patches == [{"state": "failed"}]
        assert end is S.CANCELLED, (end, await r.history(op_id))
        assert "failed" in await r.raw_states(op_id)
        assert (await r.op(op_id)).last_error is None
        cause = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 AND to_state = 'cancelled'",
            op_id,
        )
        assert "status read: remote failed after our cancel request, which" in cause, cause
        assert "ends a job failed (cancel.ends_failed)" in cause, cause


class _PatchAnswerLost(AirflowFixture):
    """The first PATCH sets the run failed, its answer never comes."""

    async def patch(self, request: Request) -> Response:
        answer = await super().patch(request)
        if len(self.patches) == 1:
            await hang()
        return answer


async def test_airflow_a_cancel_whose_answer_was_lost_is_recorded_cancelled(
    pool: Any, tmp_path: Path
) -> None:
    """The PATCH set the run failed, its answer lost: the read before the resend
    (read_first) finds the run failed, our cancel's doing as much as when its
    answer came (cancel.ends_failed). Before, that read was taken for a run that
    had ended by itself: `failed`, "none of ours was taken", a failure the run
    never had, told by a cause that denied the PATCH on record."""
    fx = _PatchAnswerLost()
    async with airflow(pool, tmp_path, fx) as r:
        op_id = await r.submit(dag_run("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        end = await r.settle(op_id, ENDS)
        assert fx.patches == [{"state": "failed"}]
        assert end is S.CANCELLED, (end, await r.history(op_id))
        assert (await r.op(op_id)).last_error is None
        cause = await pool.fetchval(
            "SELECT cause FROM history WHERE operation_id = $1 AND to_state = 'cancelled'",
            op_id,
        )
        assert "none of ours was taken" not in cause, cause
        assert "whose answer was lost" in cause, cause
        assert "ends a job failed (cancel.ends_failed)" in cause, cause


async def test_airflow_a_cancel_of_a_run_that_succeeded_meanwhile_is_not_sent(
    pool: Any, tmp_path: Path
) -> None:
    """PATCH sets a finished run failed too (cancel.read_first): the run read
    success right before is collected, no PATCH sent."""
    fx = AirflowFixture()
    async with airflow(pool, tmp_path, fx) as r:
        op_id = await r.submit(dag_run("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.patches == []
        assert fx.only()["state"] == "success"


async def test_airflow_a_conflict_over_the_logical_date_is_not_taken_for_our_run(
    pool: Any, tmp_path: Path
) -> None:
    """Airflow answers 409 Conflict alike to a run id taken and to a logical date
    taken by another run: the lookup by our id proves ours absent, so no other run
    is adopted; the create sent again meets the same 409, and a human is told
    Airflow's words, not a loop of creates."""
    fx = AirflowFixture(date_taken=True)
    async with airflow(pool, tmp_path, fx) as r:
        body = dag_run() | {"logical_date": "2026-12-05T00:00:00+00:00"}
        op_id = await r.submit(body, create_deadline_s=3)
        end = await r.settle(op_id, ENDS)
        assert end is S.NEEDS_ATTENTION, (end, await r.history(op_id))
        assert fx.jobs == {}
        assert (await r.op(op_id)).remote_job_id is None
        assert fx.refused_creates <= 2, fx.refused_creates
        assert "logical date" in await reason(r, op_id)


# --- Kubernetes --------------------------------------------------------------------

K8S_ENV = {"K8S_TOKEN": K8S_TOKEN}


def k8s_job(script: str | None = None) -> dict[str, Any]:
    labels = {"app": "etl"} | ({"script": script} if script else {})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"labels": labels},
        "spec": {
            "backoffLimit": 3,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "etl", "image": "etl:1.4", "command": ["etl"]}],
                }
            },
        },
    }


def k8s(pool: Any, tmp_path: Path, fx: KubernetesJobsFixture) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="k8s_jobs",
        env=K8S_ENV,
        overrides=described("k8s_jobs"),
    )


async def test_k8s_a_job_complete_by_its_condition_keeps_its_status(
    pool: Any, tmp_path: Path
) -> None:
    """SuccessCriteriaMet comes before Complete in the list: the selector reads
    Complete wherever it stands; a read with neither is running (HTTP 200)."""
    fx = KubernetesJobsFixture()
    async with k8s(pool, tmp_path, fx) as r:
        op_id = await r.submit(k8s_job())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert job["id"].startswith("jw-") and len(job["id"]) <= 63
        assert {"HTTP 200", "Complete"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert kept["succeeded"] == 1
        assert [c["type"] for c in kept["conditions"]] == ["SuccessCriteriaMet", "Complete"]


async def test_k8s_a_failed_job_is_failed_with_its_conditions_reason(
    pool: Any, tmp_path: Path
) -> None:
    """FailureTarget first (pods still stopping: running), then Failed, its reason
    BackoffLimitExceeded and its message the failure's."""
    fx = KubernetesJobsFixture()
    async with k8s(pool, tmp_path, fx) as r:
        op_id = await r.submit(k8s_job("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == K8S_FAILURE
        assert (await r.op(op_id)).last_error["code"] == "BackoffLimitExceeded"
        # FailureTarget alone (its pods stopping) read as running: Failed decided
        assert fx.only()["reads"] >= 3
        assert {"HTTP 200", "Failed"} <= await r.raw_states(op_id)


async def test_k8s_a_resumed_job_whose_suspended_condition_stays_is_read_to_its_end(
    pool: Any, tmp_path: Path
) -> None:
    """A Job created suspended reads {type: Suspended, status: "True"}, pending, and
    keeps the condition, status "False", once resumed: running, on to Complete
    (its status read in the third state path, True and False mapped)."""
    fx = KubernetesJobsFixture(suspended_first=True)
    async with k8s(pool, tmp_path, fx) as r:
        op_id = await r.submit(k8s_job())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        first = kept["conditions"][0]
        assert (first["type"], first["status"]) == ("Suspended", "False")
        assert {"True", "False", "Complete"} <= await r.raw_states(op_id)


async def test_k8s_a_deleted_job_is_cancelled(pool: Any, tmp_path: Path) -> None:
    fx = KubernetesJobsFixture()
    async with k8s(pool, tmp_path, fx) as r:
        op_id = await r.submit(k8s_job("slow"))
        await r.settle(op_id, {S.OBSERVING})
        name = fx.only()["id"]
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [name]
        assert fx.deletes == ["Background"]


async def test_k8s_a_cancel_of_a_completed_job_deletes_nothing(pool: Any, tmp_path: Path) -> None:
    fx = KubernetesJobsFixture()
    async with k8s(pool, tmp_path, fx) as r:
        op_id = await r.submit(k8s_job("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.cancels == []


async def test_k8s_a_job_its_ttl_removed_before_a_read_saw_its_end_goes_to_a_human(
    pool: Any, tmp_path: Path
) -> None:
    """A Job with ttlSecondsAfterFinished is deleted once it ended: one gone before
    any read saw Complete reads 404 NotFound, no cancel of ours behind it. Nothing
    tells a success from a failure then: a human is told, no state guessed."""
    fx = KubernetesJobsFixture()
    async with k8s(pool, tmp_path, fx) as r:
        op_id = await r.submit(k8s_job("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.jobs.clear()
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        esc = await r.escalation(op_id)
        assert esc is not None and "does not exist" in esc["reason"], esc


async def test_k8s_a_lost_create_is_the_job_of_the_name_we_chose(pool: Any, tmp_path: Path) -> None:
    """409 AlreadyExists to the resend: the Job is read by its name and adopted."""
    fx = KubernetesJobsFixture(lose_first_create=True)
    async with k8s(pool, tmp_path, fx) as r:
        op_id = await r.submit(k8s_job())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert len(fx.jobs) == 1
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


# --- AWS Batch ---------------------------------------------------------------------

(BATCH_KEY,) = BATCH_KEYS
BATCH_ENV = {"AWS_ACCESS_KEY_ID": BATCH_KEY, "AWS_SECRET_ACCESS_KEY": BATCH_KEYS[BATCH_KEY]}


def batch_job(script: str | None = None) -> dict[str, Any]:
    params = {"day": "2026-12-05"} | ({"script": script} if script else {})
    return {"jobQueue": "etl-queue", "jobDefinition": "nightly-etl", "parameters": params}


def aws_batch(pool: Any, tmp_path: Path, fx: AwsBatchFixture, **over: Any) -> Any:
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="aws_batch",
        env=BATCH_ENV,
        overrides=described("aws_batch", **over),
    )


async def test_aws_batch_a_job_read_inside_its_list_is_collected(pool: Any, tmp_path: Path) -> None:
    fx = AwsBatchFixture()
    async with aws_batch(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert job["body"]["jobName"] == op_id
        assert fx.describes and all(ids == [job["id"]] for ids in fx.describes)
        assert {"RUNNABLE", "RUNNING", "SUCCEEDED"} <= await r.raw_states(op_id)
        kept = json.loads(await r.result_bytes(op_id))
        assert (kept["container"]["exitCode"], kept["container"]["logStreamName"]) == (
            0,
            BATCH_LOGS,
        )
        # the statusReason a success carries too is no error of the operation
        assert (await r.op(op_id)).last_error is None


async def test_aws_batch_a_failed_job_is_failed_with_its_status_reason(
    pool: Any, tmp_path: Path
) -> None:
    fx = AwsBatchFixture()
    async with aws_batch(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job("fail"))
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert await reason(r, op_id) == BATCH_EXITED


async def test_aws_batch_a_terminated_job_is_cancelled_by_its_reason(
    pool: Any, tmp_path: Path
) -> None:
    """TerminateJob ends the job FAILED, statusReason our reason
    (status.cancelled_error_codes): cancelled, not failed."""
    fx = AwsBatchFixture()
    async with aws_batch(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job("slow"))
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        (sent,) = fx.terminates
        assert sent == {"jobId": fx.only()["id"], "reason": "Cancelled by jobwarden"}


async def test_aws_batch_a_terminate_of_a_job_that_succeeded_meanwhile_keeps_its_success(
    pool: Any, tmp_path: Path
) -> None:
    """TerminateJob of a job that ended changes nothing (200 {}): the next read shows
    SUCCEEDED, collected, and no cancel claimed."""
    fx = AwsBatchFixture()
    async with aws_batch(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id))["status"] == "SUCCEEDED"


async def test_aws_batch_a_lost_submit_is_found_by_its_job_name(pool: Any, tmp_path: Path) -> None:
    """SubmitJob takes no client token: the lost submit is looked up by ListJobs, a
    POST naming the queue and a JOB_NAME filter in its body (lookup.body), and
    adopted, never sent twice."""
    fx = AwsBatchFixture(lose_first_create=True)
    async with aws_batch(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job())
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.list_bodies and all(
            b == {"jobQueue": "etl-queue", "filters": [{"name": "JOB_NAME", "values": [op_id]}]}
            for b in fx.list_bodies
        )
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_aws_batch_a_lost_submit_to_another_queue_is_never_sent_twice(
    pool: Any, tmp_path: Path
) -> None:
    """The lookup lists one queue (its body is the description's): a job the agent
    sent to another queue would be missing from it, its absence "proven" and the
    submit sent again, a second job. The description pins the queue
    (create.set_body), so the job is where the lookup looks."""
    fx = AwsBatchFixture(lose_first_create=True)
    async with aws_batch(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job() | {"jobQueue": "other-queue"})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.only()["body"]["jobQueue"] == "etl-queue"


async def test_aws_batch_a_job_unknown_to_describejobs_goes_to_a_human(
    pool: Any, tmp_path: Path
) -> None:
    """An id DescribeJobs does not know is left out of its list (200 {"jobs": []}),
    never a 404: read as naming no state, ten times, then a human is told."""
    fx = AwsBatchFixture()
    async with aws_batch(pool, tmp_path, fx) as r:
        op_id = await r.submit(batch_job("slow"))
        await r.settle(op_id, {S.OBSERVING})
        fx.jobs.clear()
        assert await r.settle(op_id, ENDS) is S.NEEDS_ATTENTION, await r.history(op_id)
        esc = await r.escalation(op_id)
        assert esc is not None and "/jobs/0/status" in esc["reason"], esc


# --- GitLab ------------------------------------------------------------------------

GL_ENV = {"GITLAB_TOKEN": GL_TOKEN, "GITLAB_WEBHOOK_TOKEN": GL_HOOK_TOKEN}


def gitlab(pool: Any, tmp_path: Path, fx: GitlabFixture, *, with_receiver: bool = False) -> Any:
    table = described("gitlab_pipelines")
    if not with_receiver:
        table.pop("webhooks")
    return preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="gitlab_pipelines",
        env=GL_ENV,
        overrides=table,
        with_receiver=with_receiver,
    )


async def test_gitlab_a_pipeline_is_read_and_its_test_report_kept(
    pool: Any, tmp_path: Path
) -> None:
    fx = GitlabFixture()
    async with gitlab(pool, tmp_path, fx) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        job = fx.only()
        assert job["name"] == op_id and job["ref"] == "main"
        assert {"pending", "running", "success"} <= await r.raw_states(op_id)
        assert json.loads(await r.result_bytes(op_id)) == gl_report()


async def test_gitlab_a_failed_pipeline_is_failed(pool: Any, tmp_path: Path) -> None:
    fx = GitlabFixture()
    fx.script = "fail"
    async with gitlab(pool, tmp_path, fx) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "failed" in await reason(r, op_id)


async def test_gitlab_a_pipeline_refused_for_its_ref_stops_with_gitlabs_words(
    pool: Any, tmp_path: Path
) -> None:
    """400 {"message": {"base": ["Reference not found"]}}: GitLab's message is an
    object; the refusal is recorded in its words, no pipeline made."""
    fx = GitlabFixture()
    table = described("gitlab_pipelines", create={"path": "/api/v4/projects/42/pipeline?ref=nope"})
    table.pop("webhooks")
    async with preset_rig(
        pool,
        tmp_path,
        fx.app(),
        preset=None,
        name="gitlab_pipelines",
        env=GL_ENV,
        overrides=table,
    ) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, ENDS) is S.FAILED, await r.history(op_id)
        assert "Reference not found" in await reason(r, op_id)
        assert fx.jobs == {}


async def test_gitlab_a_cancel_goes_through_canceling(pool: Any, tmp_path: Path) -> None:
    fx = GitlabFixture()
    fx.script = "slow"
    async with gitlab(pool, tmp_path, fx) as r:
        op_id = await r.submit({})
        await r.settle(op_id, {S.OBSERVING})
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.CANCELLED, await r.history(op_id)
        assert [c[0] for c in fx.cancels] == [fx.only()["id"]]
        assert "canceled" in await r.raw_states(op_id)


async def test_gitlab_a_cancel_of_a_finished_pipeline_keeps_its_report(
    pool: Any, tmp_path: Path
) -> None:
    """The cancel of a pipeline that succeeded is answered with the pipeline as it
    is (status success): collected, its report kept, no cancel claimed."""
    fx = GitlabFixture()
    fx.script = "slow"
    async with gitlab(pool, tmp_path, fx) as r:
        op_id = await r.submit({})
        await r.settle(op_id, {S.OBSERVING})
        fx.finish(fx.only()["id"])
        await r.cancel(op_id)
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert "cancelled" not in await r.history(op_id)
        assert json.loads(await r.result_bytes(op_id)) == gl_report()


async def test_gitlab_a_lost_create_is_found_by_the_pipelines_name(
    pool: Any, tmp_path: Path
) -> None:
    fx = GitlabFixture(lose_first_create=True)
    async with gitlab(pool, tmp_path, fx) as r:
        op_id = await r.submit({})
        assert await r.settle(op_id, ENDS) is S.SUCCEEDED, await r.history(op_id)
        assert fx.creates == 1
        assert fx.list_queries and all(q.get("name") == op_id for q in fx.list_queries)
        assert (await r.op(op_id)).remote_job_id == fx.only()["id"]


async def test_gitlab_the_pipeline_hook_wakes_the_operation_and_a_forged_one_is_refused(
    pool: Any, tmp_path: Path
) -> None:
    fx = GitlabFixture()
    fx.script = "slow"
    async with gitlab(pool, tmp_path, fx, with_receiver=True) as r:
        op_id = await r.submit({})
        await r.settle(op_id, {S.OBSERVING, S.ACCEPTED})
        pid = fx.only()["id"]
        fx.finish(pid)
        forged = await fx.deliver(r.hook_url, pid, token="not-the-secret-token-0123456789")
        assert forged.status_code == 401
        answer = await fx.deliver(r.hook_url, pid, key="retry-of-one-event")
        assert answer.status_code == 200 and answer.json()["matched"] is True, answer.text
        again = await fx.deliver(r.hook_url, pid, key="retry-of-one-event")
        assert again.status_code == 200 and again.json()["status"] == "duplicate", again.text
        assert await r.settle(op_id, ENDS, timeout=8) is S.SUCCEEDED, await r.history(op_id)
        events = await r.pool.fetch("SELECT operation_id, remote_job_id FROM webhook_events")
        assert [tuple(e) for e in events] == [(op_id, pid)]
