"""Excerpts of AssemblyAI's OpenAPI document: transcripts, as the assemblyai contract tests read it.

Source: github.com/AssemblyAI/assemblyai-api-spec, file openapi.json, commit
3fcf678dc009e6331077ddef1d829acb6e4611fb (2026-03-23), info.version "1.3.4",
OpenAPI 3.1.0, server https://api.assemblyai.com.

Copied as printed, $refs resolved by hand; `description`, `x-label`,
`x-fern-*`, `x-aai-*` and `example` keys are left out. Two liberties, each
said where it is taken:

- TRANSCRIPT_PARAMS merges the document's `allOf` of two closed objects
  (`additionalProperties: false` on each) into one closed object: read
  literally by a JSON Schema validator, that `allOf` accepts no body but
  `{"audio_url": ...}`, which is not what the document means. Of the optional
  parameters it keeps those the tests send.
- TRANSCRIPT keeps the required properties and those the preset or the tests
  read; the document's object is closed (`additionalProperties: false`) and
  so is the excerpt, so its generated bodies carry only these.
"""

from __future__ import annotations

from typing import Any

from tests.contract.support import Operation

DOCUMENT = "AssemblyAI/assemblyai-api-spec openapi.json @ 3fcf678d (info.version 1.3.4)"
SERVER = "https://api.assemblyai.com"

# #/paths: transcripts
OPERATIONS = (
    Operation("POST", "/v2/transcript", "createTranscript"),
    Operation("GET", "/v2/transcript", "listTranscripts"),
    Operation("GET", "/v2/transcript/{transcript_id}", "getTranscript"),
    Operation("DELETE", "/v2/transcript/{transcript_id}", "deleteTranscript"),
)

# #/components/schemas/TranscriptParams = allOf [{audio_url}, TranscriptOptionalParams]
# (merged, see the module docstring; TranscriptOptionalParams requires speech_models)
TRANSCRIPT_PARAMS: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["audio_url", "speech_models"],
    "properties": {
        "audio_url": {"type": "string", "format": "url"},
        "punctuate": {"type": "boolean", "default": True},
        "format_text": {"type": "boolean", "default": True},
        "speaker_labels": {"type": "boolean", "default": False},
        "speech_models": {"type": "array", "items": {"type": "string"}},
        "webhook_auth_header_name": {"type": ["string", "null"], "default": None},
        "webhook_auth_header_value": {"type": ["string", "null"], "default": None},
        "webhook_url": {"type": "string", "format": "url"},
    },
}

# #/components/schemas/TranscriptStatus
TRANSCRIPT_STATUS: dict[str, Any] = {
    "type": "string",
    "enum": ["queued", "processing", "completed", "error"],
}

# #/components/schemas/Transcript (excerpt: see the module docstring; TranscriptWord,
# TranscriptStatus and SpeechModel inlined)
TRANSCRIPT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "audio_duration": {"type": ["integer", "null"]},
        "audio_url": {"type": "string", "format": "url"},
        "auto_highlights": {"type": "boolean"},
        "confidence": {"type": ["number", "null"], "format": "double", "minimum": 0, "maximum": 1},
        "error": {"type": "string"},
        "id": {"type": "string", "format": "uuid"},
        "language_confidence": {
            "type": ["number", "null"],
            "format": "double",
            "minimum": 0,
            "maximum": 1,
        },
        "language_confidence_threshold": {
            "type": ["number", "null"],
            "format": "float",
            "minimum": 0,
            "maximum": 1,
        },
        "punctuate": {"type": ["boolean", "null"]},
        "redact_pii": {"type": "boolean"},
        "status": TRANSCRIPT_STATUS,
        "summarization": {"type": "boolean", "deprecated": True},
        "text": {"type": ["string", "null"]},
        "throttled": {"type": ["boolean", "null"]},
        "webhook_auth": {"type": "boolean"},
        "webhook_auth_header_name": {"type": ["string", "null"]},
        "webhook_status_code": {"type": ["integer", "null"]},
        "webhook_url": {"type": ["string", "null"], "format": "url"},
        "words": {
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["confidence", "start", "end", "text", "speaker"],
                "properties": {
                    "confidence": {
                        "type": "number",
                        "format": "double",
                        "minimum": 0,
                        "maximum": 1,
                    },
                    "start": {"type": "integer"},
                    "end": {"type": "integer"},
                    "text": {"type": "string"},
                    "channel": {"type": ["string", "null"]},
                    "speaker": {"type": ["string", "null"]},
                },
            },
        },
        "acoustic_model": {"type": "string", "deprecated": True},
        "language_model": {"type": "string", "deprecated": True},
        "speech_model": {"oneOf": [{"type": "string"}, {"type": "null"}], "deprecated": True},
    },
    "required": [
        "id",
        "speech_model",
        "language_model",
        "acoustic_model",
        "status",
        "audio_url",
        "webhook_auth",
        "auto_highlights",
        "redact_pii",
        "summarization",
        "language_confidence_threshold",
        "language_confidence",
    ],
}

# #/components/schemas/Transcript/example, the excerpt's properties only (text and words cut short)
TRANSCRIPT_EXAMPLE: dict[str, Any] = {
    "id": "9ea68fd3-f953-42c1-9742-976c447fb463",
    "speech_model": None,
    "language_model": "assemblyai_default",
    "acoustic_model": "assemblyai_default",
    "language_confidence_threshold": 0.7,
    "language_confidence": 0.9959,
    "status": "completed",
    "audio_url": "https://assembly.ai/wildfires.mp3",
    "text": "Smoke from hundreds of wildfires in Canada is triggering air quality alerts.",
    "words": [{"text": "Smoke", "start": 250, "end": 650, "confidence": 0.97465, "speaker": None}],
    "confidence": 0.9404651451800253,
    "audio_duration": 281,
    "punctuate": True,
    "webhook_url": "https://your-webhook-url.tld/path",
    "webhook_status_code": 200,
    "webhook_auth": True,
    "webhook_auth_header_name": "webhook-secret",
    "auto_highlights": True,
    "redact_pii": True,
    "summarization": False,
    "throttled": None,
}

# #/components/schemas/TranscriptReadyNotification (TranscriptReadyStatus inlined): the body of
# the transcriptReadyWebhook callback of createTranscript
TRANSCRIPT_READY_NOTIFICATION: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "transcript_id": {"type": "string", "format": "uuid"},
        "status": {"type": "string", "enum": ["completed", "error"]},
    },
    "required": ["transcript_id", "status"],
}

# #/components/schemas/RedactedAudioNotification = allOf [RedactedAudioResponse] (inlined): the
# redactedAudioWebhook callback, sent to the same webhook_url
REDACTED_AUDIO_NOTIFICATION: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["status", "redacted_audio_url"],
    "properties": {
        "status": {"type": "string", "enum": ["redacted_audio_ready"]},
        "redacted_audio_url": {"type": "string", "format": "url"},
    },
}

# #/components/schemas/Error (the body of every 4xx/5xx in #/components/responses)
ERROR: dict[str, Any] = {
    "type": "object",
    "additionalProperties": True,
    "required": ["error"],
    "properties": {"error": {"type": "string"}, "status": {"type": "string", "const": "error"}},
}
