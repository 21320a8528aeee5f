"""An AssemblyAI transcripts fixture: /v2/transcript in the documented shapes.

The scenario is the audio file name: {"audio_url": "https://example.com/<scenario>.mp3"}:

- happy    queued -> processing -> completed with the transcript;
- error    -> error, with the reason as a string;
- notext   completed, but without `text` (a broken answer the preset must refuse);
- slow     processing for a long time (AssemblyAI has no cancel endpoint);
- lost     like happy, but the create answer never arrives in time;
- held     processing until the test releases it, then completed at the next read
           (webhook tests).
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.fixtures_providers.common import (
    Job,
    Registry,
    authorized,
    hang,
    json_response,
    read_json,
)

API_KEY = "aai-test-key"
TEXT = "Smoke from hundreds of wildfires in Canada is triggering air quality alerts."


class AssemblyAIFixture:
    def __init__(self) -> None:
        self.registry = Registry("tr-")

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v2/transcript", self.create, methods=["POST"]),
                Route("/v2/transcript/{tid}", self.get, methods=["GET"]),
            ]
        )

    async def create(self, request: Request) -> Response:
        if not authorized(request, "authorization", API_KEY):
            return json_response({"error": "Authentication error, API token missing/invalid"}, 401)
        self.registry.count("create")
        body = await read_json(request)
        audio = str(body.get("audio_url", ""))
        if not audio.startswith("https://"):
            return json_response({"error": "audio_url must be a public https URL"}, 400)
        scenario = audio.rsplit("/", 1)[-1].removesuffix(".mp3")
        job = self.registry.add(scenario, body, dict(request.headers))
        job.hold = scenario == "held"
        if scenario == "lost":
            await hang()
        return json_response(self.transcript(job))

    async def get(self, request: Request) -> Response:
        job = self.registry.jobs.get(request.path_params["tid"])
        if job is None:
            return json_response({"error": "Transcript not found"}, 404)
        self.registry.count("get")
        job.reads += 1
        return json_response(self.transcript(job))

    def transcript(self, job: Job) -> dict[str, Any]:
        status, text, error = self._phase(job)
        body: dict[str, Any] = {
            "id": job.job_id,
            "audio_url": job.request.get("audio_url"),
            "status": status,
            "error": error,
            "webhook_url": job.request.get("webhook_url"),
            "webhook_auth": "webhook_auth_header_name" in job.request,
            "language_code": "en_us",
            "audio_duration": 12,
        }
        if status == "completed":
            body["confidence"] = 0.97
            body["words"] = [{"text": "Smoke", "start": 240, "end": 640, "confidence": 0.99}]
            if text is not None:
                body["text"] = text
        else:
            body["text"] = None
        return body

    def _phase(self, job: Job) -> tuple[str, str | None, str | None]:
        scenario, reads = job.scenario, job.reads
        if scenario == "held":  # processing until the test releases it, then done
            return ("processing", None, None) if job.hold else ("completed", TEXT, None)
        if reads == 0:
            return "queued", None, None
        if scenario == "error":
            return "error", None, "Audio file is too short to transcribe"
        if scenario == "slow" or job.hold or reads == 1:
            return "processing", None, None
        if scenario == "notext":
            return "completed", None, None
        return "completed", TEXT, None
