"""`jobwarden providers list | show NAME | check CONFIG`: presets and what a config promises.

An operator pointing jobwarden at a real API must learn *before the first
job* what happens when a create response is lost, whether a cancel can be
sent, whether webhooks can be trusted and whether a corrupted result would be
caught. `check` loads a config exactly as the daemons do (the `[jobwarden]`
settings with their environment overrides, presets merged with overrides,
every key validated, secrets read from the environment), makes the checks the
reconciler makes before it starts (leases against call timeouts, the
certificate authorities file, the evidence log's signing key: there, readable
by whoever runs the check, and a key), and says in plain words what each
provider guarantees; `--json` gives the same to scripts.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from shared import signatures
from shared.cli.captures import CaptureError, read_capture
from shared.cli.operator import json_flag
from shared.cli.proofs import prove_delivery, prove_result
from shared.ledger import log as evidence_log
from shared.providers import (
    ConfigError,
    ProviderDescription,
    describe_guarantees,
    parse_providers,
    preset_names,
)
from shared.providers.config import advisories
from shared.providers.templates import Template
from shared.settings import Settings, load_settings

WEBHOOKS_SIGNED = "webhooks signed"
UNPROVEN = "configured, not yet verified against a real delivery (check one with --delivery FILE)"
# Presets mark what the user must replace with this text (create.path, base_url).
PLACEHOLDER = "change-me"
# A syntactically valid Standard Webhooks secret, so `show` can describe a
# preset's webhook guarantees without anyone's real secret.
_SAMPLE_WHSEC = "whsec_" + "c2FtcGxlLXNlY3JldA=="


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `providers list|show|check` to `jobwarden`'s subcommand parser."""
    parser = sub.add_parser(
        "providers", help="built-in provider presets, and what a config can promise"
    )
    actions = parser.add_subparsers(dest="providers_command", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="the built-in presets")
    json_flag(listing)
    listing.set_defaults(handler=cmd_list)

    show = actions.add_parser(
        "show", help="a preset's description (TOML with its documentation comments)"
    )
    show.add_argument("name", metavar="NAME", help="preset name, e.g. openai_batch")
    json_flag(show)
    show.set_defaults(handler=cmd_show)

    check = actions.add_parser(
        "check",
        help="validate a config (presets and overrides, secrets from the environment) and "
        "say what each provider guarantees",
    )
    check.add_argument("config", metavar="CONFIG", help="TOML config file")
    check.add_argument(
        "--daemon",
        choices=("reconciler", "receiver"),
        default="reconciler",
        help="check what this daemon reads at start-up (default: reconciler, which reads "
        "everything the receiver reads, the signing key and the CA file too); run it as that "
        "daemon's user, with its environment",
    )
    check.add_argument(
        "--provider",
        metavar="NAME",
        help="report this provider only (the whole file is still checked); the one a "
        "capture is for, when the file has several",
    )
    check.add_argument(
        "--delivery",
        metavar="FILE",
        type=Path,
        help="a captured webhook (raw HTTP request, or JSON {headers, body}): does it "
        "verify, and what would be recorded?",
    )
    check.add_argument(
        "--at",
        metavar="UNIX_SECONDS",
        type=_unix_seconds,
        help="verify the delivery as of this time (when it was sent); default: now",
    )
    check.add_argument("--url", help="the URL the sender addressed (for schemes that sign {url})")
    check.add_argument(
        "--result",
        metavar="FILE",
        type=Path,
        help="a captured result (raw HTTP response, JSON {headers, body}, or the bare "
        "body): run result validation on it offline",
    )
    check.add_argument(
        "--status",
        metavar="FILE",
        type=Path,
        help="with --result: the captured status response that pointed to it "
        "(its counts and checksums are checked against the result)",
    )
    json_flag(check)
    check.set_defaults(handler=cmd_check)


# --------------------------------------------------------------------- commands


async def cmd_list(args: argparse.Namespace) -> int:
    presets = [
        {"name": name, "description": _preset_data(name).get("description", "")}
        for name in preset_names()
    ]
    if args.json:
        print(json.dumps(presets, indent=2))
        return 0
    width = max(len(p["name"]) for p in presets)
    for preset in presets:
        print(f"{preset['name']:<{width}}  {preset['description']}")
    return 0


async def cmd_show(args: argparse.Namespace) -> int:
    if args.name not in preset_names():
        return _fail(f"unknown preset '{args.name}' (available: {', '.join(preset_names())})")
    if not args.json:
        print(_preset_text(args.name), end="")
        return 0
    data = _preset_data(args.name)
    secrets = _secret_variables(data)
    env = {entry["env"]: entry["sample"] for entry in secrets}
    desc = parse_providers({"providers": {args.name: {"preset": args.name}}}, "preset", env)
    summary = {
        "name": args.name,
        "description": data.get("description", ""),
        "base_url": data.get("base_url"),
        "secrets": [{k: v for k, v in entry.items() if k != "sample"} for entry in secrets],
        # What the preset can promise with every secret configured.
        "guarantees": _guarantees(desc[args.name]),
    }
    print(json.dumps(summary, indent=2))
    return 0


async def cmd_check(args: argparse.Namespace) -> int:
    path = Path(args.config)
    daemon = getattr(args, "daemon", None) or "reconciler"
    try:
        # as that daemon loads it: the receiver needs no provider API key
        settings = _load_settings(path, credentials=daemon == "reconciler")
        signing = _startup_checks(settings) if daemon == "reconciler" else None
        providers = settings.providers
        _check_signed_url(path, settings)
        proofs = _proofs(args, providers, settings.public_webhook_url)
        if args.provider is not None:
            providers = {args.provider: _named(providers, args.provider)}
    except (ConfigError, CaptureError) as exc:
        if args.json:
            print(json.dumps({"config": str(path), "valid": False, "error": str(exc)}, indent=2))
            return 1
        return _fail(f"invalid: {exc}")
    public_url = settings.public_webhook_url if daemon == "reconciler" else None
    report = [
        _provider_report(desc, proofs.get(name, {}), public_url) for name, desc in providers.items()
    ]
    failed = any(_proof_failed(p) for p in proofs.values())
    if args.json:
        document = {"config": str(path), "valid": True, "daemon": daemon}
        print(json.dumps({**document, "evidence_log": signing, "providers": report}, indent=2))
        return 1 if failed else 0
    print(f"{path}: valid, {len(report)} provider(s)")
    print(_render_signing(signing))
    for entry in report:
        print()
        print(_render(entry))
    return 1 if failed else 0


def _unix_seconds(text: str) -> float:
    """`--at`: a finite time. float() reads "nan", and every replay-window
    comparison with NaN is false: a capture of any age would pass as fresh."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a time in unix seconds")
    return value


def _load_settings(path: Path, *, credentials: bool) -> Settings:
    """The whole file, the environment over its `[jobwarden]` table, as the daemons read it."""
    try:
        return load_settings(path, credentials=credentials)
    except OSError as exc:  # not found is a ConfigError already; this is, say, EACCES
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None


def _startup_checks(settings: Settings) -> dict[str, Any]:
    """What the reconciler checks before it starts, each failure a ConfigError.

    The same checks as `run_reconciler`: every call fits in a lease, the CA
    file loads, the signing key (JW_LOG_SIGNING_KEY, else the file) can be
    read by this user and is a signer key, each previous key file a log's
    public key. Returns what the evidence log will do with them, for the report.
    """
    # the reconciler's own checks, not a copy
    from reconciler.daemon import check_startup, previous_log_keys

    signer = check_startup(settings)
    previous = previous_log_keys(settings)
    key_file = settings.log_signing_key_file
    inline = bool(os.environ.get(evidence_log.SIGNING_KEY_ENV))
    warnings = []
    if signer is not None and not inline:
        if os.stat(key_file).st_mode & 0o077:
            warnings.append(f"{key_file} can be read by other users: chmod 600 it")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            warnings.append(
                "checked as root, who reads any file: run the check as the reconciler's user "
                "(systemd-run --uid=jobwarden ...) to prove that user can read the key"
            )
    if previous and signer is None:
        warnings.append(
            "log_previous_key_files is set but no checkpoint is signed: the keys are not used"
        )
    for name, key in zip(settings.log_previous_key_files, previous, strict=True):
        if signer is not None and key == signer.verifier:
            warnings.append(f"{name} is the signing key's own public key: name the one it replaced")
    source = f"${evidence_log.SIGNING_KEY_ENV}" if inline else key_file
    return {
        "signed": signer is not None,
        "name": signer.name if signer is not None else None,
        "key": source if signer is not None else None,
        "checkpoint_dir": str(settings.log_checkpoint_dir),
        "previous_keys": [
            {"file": name, "key": f"{key.name}+{key.key_id:08x}"}
            for name, key in zip(settings.log_previous_key_files, previous, strict=True)
        ],
        "warnings": warnings,
    }


def _render_signing(signing: Mapping[str, Any] | None) -> str:
    if signing is None:
        return "evidence log: signing key not checked (the receiver never reads it)"
    if not signing["signed"]:
        lines = [
            "evidence log: no signing key (log_signing_key_file and JW_LOG_SIGNING_KEY are "
            "empty): the log is kept but no checkpoint is signed"
        ]
    else:
        lines = [
            f"evidence log: checkpoints signed as {signing['name']} with {signing['key']}, "
            f"written to {signing['checkpoint_dir']}"
        ]
    lines.extend(
        f"  previous key {p['key']} ({p['file']}): new checkpoints are held to the last it signed"
        for p in signing["previous_keys"]
    )
    lines.extend(f"  warning: {w}" for w in signing["warnings"])
    return "\n".join(lines)


def _check_signed_url(path: Path, settings: Settings) -> None:
    """The receiver's own start-up refusal: a scheme that signs the URL (twilio, a
    `{url}` template) needs public_webhook_url, the address the provider was given.
    Both daemons load the same file, so both checks say it."""
    if settings.public_webhook_url:
        return
    for name, desc in settings.providers.items():
        hooks = desc.webhooks
        if hooks is not None and signatures.signs_url(hooks.scheme.value, hooks.options):
            raise ConfigError(
                f"{path}: providers.{name}.webhooks.scheme: {hooks.scheme.value!r} signs the "
                "URL the provider calls, so the receiver refuses to start without "
                "public_webhook_url: set it (in [jobwarden], or JW_PUBLIC_WEBHOOK_URL) to that "
                "address, {provider} standing for the name"
            )


def _named(providers: Mapping[str, ProviderDescription], name: str) -> ProviderDescription:
    if name not in providers:
        raise CaptureError(f"no provider {name!r} in the config ({', '.join(providers)})")
    return providers[name]


def _proofs(
    args: argparse.Namespace,
    providers: Mapping[str, ProviderDescription],
    public_url: str = "",
) -> dict[str, dict[str, Any]]:
    """The captures given on the command line, run against the provider they are for."""
    if args.delivery is None and args.result is None:
        if args.status is not None:
            raise CaptureError("--status goes with --result")
        return {}
    name = args.provider
    if name is None:
        if len(providers) != 1:
            raise CaptureError(f"--provider NAME is needed: {', '.join(providers)}")
        [name] = providers
    desc = _named(providers, name)
    proof: dict[str, Any] = {}
    if args.delivery is not None:
        proof["delivery"] = prove_delivery(
            desc, read_capture(args.delivery), at=args.at, url=args.url, public_url=public_url
        )
    if args.result is not None:
        status = read_capture(args.status) if args.status is not None else None
        proof["result"] = prove_result(desc, read_capture(args.result), status)
    return {name: proof}


def _proof_failed(proof: Mapping[str, Any]) -> bool:
    delivery = proof.get("delivery")
    result = proof.get("result")
    return bool(
        (delivery is not None and not delivery["verified"])
        or (result is not None and not result["valid"])
    )


# --------------------------------------------------------------------- reports


def _guarantees(desc: ProviderDescription) -> list[dict[str, Any]]:
    return [
        {"guarantee": name, "holds": holds, "why": why}
        for name, holds, why in describe_guarantees(desc)
    ]


def _provider_report(
    desc: ProviderDescription, proof: Mapping[str, Any], public_url: str | None = None
) -> dict[str, Any]:
    """`public_url`: the reconciler's public_webhook_url (None: not the reconciler's check)."""
    guarantees = _guarantees(desc)
    delivery = proof.get("delivery")
    for g in guarantees:
        if g["guarantee"] == WEBHOOKS_SIGNED and g["holds"]:
            # configured is a claim; a real delivery that verifies is the proof
            g["proved"] = bool(delivery and delivery["verified"])
            if delivery is None:
                g["why"] = f"{UNPROVEN}; {g['why']}"
            elif not delivery["verified"]:
                g["why"] = f"a captured delivery was refused ({delivery['reason']}); {g['why']}"
    return {
        "name": desc.name,
        "preset": desc.preset,
        "base_url": desc.base_url,
        "guarantees": guarantees,
        "warnings": _warnings(desc) + _callback_warnings(desc, public_url),
        **proof,
    }


def _warnings(desc: ProviderDescription) -> list[str]:
    """Things that load fine but cannot be what the operator meant."""
    found = []
    if PLACEHOLDER in desc.base_url.lower():
        found.append("base_url is still the preset's placeholder: set it to your API's host")
    if PLACEHOLDER in desc.create.path.text.lower():
        found.append("create.path is still the preset's placeholder: set it to your API's method")
    if desc.auth is None:
        found.append("no credential is sent (auth is optional and its secret is not set)")
    sent = desc.create.client_reference_field
    echoed = desc.webhooks.client_reference if desc.webhooks is not None else None
    if sent is not None and echoed is not None and echoed.segments == sent.segments:
        found.append(
            "webhooks.client_reference points where create.client_reference_field puts "
            "our operation id: set webhooks.operation_id to that path instead"
        )
    found.extend(advisories(desc))
    return found


def _callback_warnings(desc: ProviderDescription, public_url: str | None) -> list[str]:
    """A create field or header naming `{webhook_url}` or `{webhook_secret}` that the
    reconciler will leave out (a value it does not know is not sent): the provider
    is never told where to call back, and nothing else says so."""
    templates = _create_templates(desc)
    found = []
    for where, template in templates:
        if _left_out(desc, public_url, template.names):
            why = (
                "names {webhook_url} or {webhook_secret}, but this provider has no webhooks "
                "(or their secret is not set)"
                if desc.webhooks is None
                else "names {webhook_url}, but public_webhook_url is not set"
            )
            found.append(
                f"create.{where} {why}: it is left out of every create, and the provider "
                "never calls back" + _stranded(desc, public_url, where)
            )
        elif public_url and "?" in public_url and "{webhook_url}?" in template.text:
            found.append(
                f"create.{where} adds '?' to {{webhook_url}}, which already has a query "
                "(public_webhook_url): write '&' instead"
            )
    return found + _token_warnings(desc, templates)


def _left_out(desc: ProviderDescription, public_url: str | None, names: frozenset[str]) -> bool:
    """Is a create field naming these placeholders left out of every create?"""
    if desc.webhooks is None:
        return bool({"webhook_url", "webhook_secret"} & names)
    return public_url == "" and "webhook_url" in names


def _stranded(desc: ProviderDescription, public_url: str | None, where: str) -> str:
    """The set_body fields written beside a left-out one, in the object it belonged
    to (Firecrawl's `/webhook/url` and `/webhook/metadata/...`): still sent, they
    make that object without it, which a provider may refuse (Firecrawl answers
    400 "webhook.url: Required" to every create). One table at the object's path
    is left out whole."""
    field = next((f for f in desc.create.set_body if f"set_body {f.path.text}" == where), None)
    if field is None or len(field.path.segments) < 2:
        return ""
    parent = field.path.segments[:-1]
    kept = [
        other.path.text
        for other in desc.create.set_body
        if other is not field
        and other.path.segments[: len(parent)] == parent
        and not any(_left_out(desc, public_url, t.names) for t in other.templates)
    ]
    if not kept:
        return ""
    text = field.path.text
    at = text.rsplit("/", 1)[0] if text.startswith("/") else text.rsplit(".", 1)[0]
    verb = "is" if len(kept) == 1 else "are"
    return (
        f"; create.set_body {', '.join(kept)} {verb} still sent, so {at} goes without it "
        f"(a provider may refuse such an object, and every create with it): write them "
        f"as one table at {at}, left out whole"
    )


def _create_templates(desc: ProviderDescription) -> list[tuple[str, Template]]:
    """The create's templated fields and headers, each with where it is written (a
    literal's templates inside it too)."""
    spec = desc.create
    fields = [(f"set_body {f.path.text}", t) for f in spec.set_body for t in f.templates]
    return fields + [(f"set_headers {name}", template) for name, template in spec.set_headers]


def _token_warnings(desc: ProviderDescription, templates: list[tuple[str, Template]]) -> list[str]:
    """A callback token read from the query (`static_header` with `query`) that no
    create puts there: every callback would be refused, the backstop left alone."""
    hooks = desc.webhooks
    if hooks is None or not hooks.token_in_url:
        return []
    param = hooks.options["query"]
    carrying = [template.text for _, template in templates if "webhook_secret" in template.names]
    if not carrying:
        return [
            f"webhooks read the token from the query parameter {param!r}, but no create "
            "field names {webhook_secret}: every callback would be refused"
        ]
    if not any(f"{param}={{webhook_secret}}" in text for text in carrying):
        return [
            f"webhooks read the token from the query parameter {param!r}, but no create "
            f"field writes {param}={{webhook_secret}} into the callback URL: every "
            "callback would be refused"
        ]
    return []


def _render(entry: Mapping[str, Any]) -> str:
    title = entry["name"] + (f" (preset {entry['preset']})" if entry["preset"] else "")
    lines = [f"{title}  {entry['base_url']}"]
    width = max(len(g["guarantee"]) for g in entry["guarantees"]) + 1
    for g in entry["guarantees"]:
        verdict = "no " if not g["holds"] else "cfg" if g.get("proved") is False else "yes"
        lines.append(f"  {g['guarantee'] + '?':<{width}} {verdict}  {g['why']}")
    lines.extend(f"  warning: {w}" for w in entry["warnings"])
    if "delivery" in entry:
        lines.append("  delivery: " + _render_delivery(entry["delivery"]))
    if "result" in entry:
        lines.append("  result: " + _render_result(entry["result"]))
    return "\n".join(lines)


def _render_delivery(proof: Mapping[str, Any]) -> str:
    if not proof["verified"]:
        return f"REFUSED ({proof.get('reason', '-')}): {proof['why']}"
    if not proof["fresh"] or proof.get("challenge"):
        return str(proof["why"])
    if "events" in proof:
        return _render_batch(proof)
    records = proof.get("records")
    if proof["event_id_signed"]:
        text = f"verifies; event id {proof['event_id']} (signed)"
    elif proof.get("claimed_event_id"):
        text = (
            f"verifies; event id {proof['claimed_event_id']} is not covered by the signature: "
            "deduplicated by the body's sha256 instead (identical bodies count once)"
        )
    else:
        text = (
            "verifies; no event id found where the description points: deduplicated by the "
            "body's sha256 (identical bodies count once)"
        )
    if records is None:
        return f"{text}; but the body cannot be read: {proof.get('parse_error')}"
    fields = ", ".join(f"{k} {v}" for k, v in records.items() if v is not None and k != "event_id")
    return f"{text}; would record {fields}; {_render_match(proof['match_by'])}"


# How a batch's elements are deduplicated, per `deduplicated_by`.
_BATCH_DEDUPE = {
    "id": "each deduplicated by its own signed event id (the same event in a later batch "
    "counts once)",
    "hash": "each deduplicated by the sha256 of its bytes as sent (no signed event id in "
    "them: identical elements count once, in a redelivered batch or any other)",
    "mixed": "each deduplicated by its own signed event id, else (where it carries none) "
    "by the sha256 of its bytes as sent",
}

# Indent of a batch's element lines under the "  delivery:" line.
_ELEMENT_INDENT = "    "


def _render_batch(proof: Mapping[str, Any]) -> str:
    """A batch delivery: a head line, then one line per element listed."""
    count = proof["events"]
    if count == 0:
        return "verifies; a batch of 0 events: nothing would be stored"
    lines = [f"verifies; a batch of {count} events, {_BATCH_DEDUPE[proof['deduplicated_by']]}"]
    lines.extend(_ELEMENT_INDENT + _render_element(entry) for entry in proof["records"])
    if proof["more"]:
        lines.append(f"{_ELEMENT_INDENT}… and {proof['more']} more")
    return "\n".join(lines)


def _render_element(entry: Mapping[str, Any]) -> str:
    head = f"event {entry['event_id']}"
    if "parse_error" in entry:
        return f"{head}: names no job ({entry['parse_error']}): stored, matched to no operation"
    shown = ("operation_id", "client_reference", "job_id", "state", "raw_state")
    fields = ", ".join(f"{k} {entry[k]}" for k in shown if entry[k] is not None)
    return f"{head}: would record {fields}; would match by {', else '.join(entry['match_by'])}"


# What each reference needs to match, as the receiver's query decides.
_MATCH_RULES = {
    "operation_id": "operation_id (that operation, if its job id agrees)",
    "client_reference": "client_reference (if exactly one operation of this provider has it "
    "and its job id agrees)",
    "job_id": "job_id (now, or once an operation records it)",
}


def _render_match(match_by: Sequence[str]) -> str:
    return "would match by " + ", else ".join(_MATCH_RULES[name] for name in match_by)


def _render_result(proof: Mapping[str, Any]) -> str:
    verdict = "valid" if proof["valid"] else "UNAVAILABLE" if proof["unavailable"] else "INVALID"
    items = proof["items"]
    counted = (
        f", items {items['succeeded']} ok / {items['failed']} failed of {items['total']}"
        if items["total"] is not None
        else ""
    )
    return (
        f"{verdict} ({proof['reason']}); {proof['size']} bytes, sha256 {proof['sha256']}{counted}"
    )


# --------------------------------------------------------------------- preset files


def _preset_text(name: str) -> str:
    resource = resources.files("shared.providers").joinpath("presets", f"{name}.toml")
    return resource.read_text(encoding="utf-8")


def _preset_data(name: str) -> dict[str, Any]:
    return tomllib.loads(_preset_text(name))


def _secret_variables(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Environment variables a preset reads secrets from, with a sample value each."""
    found: list[dict[str, Any]] = []
    auth = data.get("auth") or {}
    if "secret_env" in auth:
        found.append(
            {
                "env": auth["secret_env"],
                "for": "auth",
                "optional": bool(auth.get("optional")),
                "sample": "sample-credential",
            }
        )
    hooks = data.get("webhooks") or {}
    names = hooks.get("secrets_env") or []
    sample = _SAMPLE_WHSEC if hooks.get("scheme") == "standard_webhooks" else "sample-token"
    for env_name in [names] if isinstance(names, str) else names:
        found.append(
            {
                "env": env_name,
                "for": "webhooks",
                "optional": bool(hooks.get("optional")),
                "sample": sample,
            }
        )
    return found


def _fail(message: str) -> int:
    print(f"providers: {message}", file=sys.stderr)
    return 1
