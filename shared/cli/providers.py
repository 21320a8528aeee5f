"""`jobwarden providers list | show NAME | check CONFIG`: presets and what a config promises.

An operator pointing jobwarden at a real API must learn *before the first
job* what happens when a create response is lost, whether a cancel can be
sent, whether webhooks can be trusted and whether a corrupted result would be
caught. `check` loads a config exactly as the daemons do (presets merged with
overrides, every key validated, secrets read from the environment) and says
so in plain words for each provider; `--json` gives the same to scripts.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from shared.cli.operator import json_flag
from shared.providers import (
    ConfigError,
    ProviderDescription,
    describe_guarantees,
    load_providers,
    parse_providers,
    preset_names,
)

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
    try:
        providers = load_providers(path)
    except ConfigError as exc:
        if args.json:
            print(json.dumps({"config": str(path), "valid": False, "error": str(exc)}, indent=2))
            return 1
        return _fail(f"invalid: {exc}")
    report = [_provider_report(desc) for desc in providers.values()]
    if args.json:
        print(json.dumps({"config": str(path), "valid": True, "providers": report}, indent=2))
        return 0
    print(f"{path}: valid, {len(report)} provider(s)")
    for entry in report:
        print()
        print(_render(entry))
    return 0


# --------------------------------------------------------------------- reports


def _guarantees(desc: ProviderDescription) -> list[dict[str, Any]]:
    return [
        {"guarantee": name, "holds": holds, "why": why}
        for name, holds, why in describe_guarantees(desc)
    ]


def _provider_report(desc: ProviderDescription) -> dict[str, Any]:
    return {
        "name": desc.name,
        "preset": desc.preset,
        "base_url": desc.base_url,
        "guarantees": _guarantees(desc),
        "warnings": _warnings(desc),
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
    return found


def _render(entry: Mapping[str, Any]) -> str:
    title = entry["name"] + (f" (preset {entry['preset']})" if entry["preset"] else "")
    lines = [f"{title}  {entry['base_url']}"]
    width = max(len(g["guarantee"]) for g in entry["guarantees"]) + 1
    for g in entry["guarantees"]:
        verdict = "yes" if g["holds"] else "no "
        lines.append(f"  {g['guarantee'] + '?':<{width}} {verdict}  {g['why']}")
    lines.extend(f"  warning: {w}" for w in entry["warnings"])
    return "\n".join(lines)


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
