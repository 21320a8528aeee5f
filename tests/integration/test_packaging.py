"""Packaging: the Dockerfile, the systemd units, the example config and env file, the roles.

No Docker engine and no systemd as PID 1 here, so each artefact is checked for
the properties an operator relies on, with the real linters (hadolint,
`systemd-analyze`) wherever they are installed, and by running what can run
on its own: the HEALTHCHECK command against a real HTTP server, the example
config through the real loader, the roles script on the real PostgreSQL.
"""

from __future__ import annotations

import base64
import configparser
import contextlib
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from packaging.requirements import Requirement

from shared.cli.main import build_parser
from shared.db.connect import ResolvedDatabase, connect, with_database
from shared.db.migrate import apply_migrations
from shared.settings import _ENV as SETTING_VARIABLES
from shared.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
SYSTEMD = ROOT / "deploy" / "systemd"
CONFIG_EXAMPLE = ROOT / "deploy" / "config.example.toml"
ENV_EXAMPLE = SYSTEMD / "jobwarden.env.example"
ROLES_SQL = ROOT / "deploy" / "sql" / "create_login_roles.sql"

# The unit of the daemon that faces the internet (its own user, no state).
RECEIVER = "jobwarden-receiver"
UNITS = {
    "jobwarden-receiver.service": "receiver",
    "jobwarden-reconciler.service": "reconciler",
    "jobwarden-reconciler@.service": "reconciler",
}
INSTALLED_BINARY = "/opt/jobwarden/bin/jobwarden"
# systemd-analyze's exposure score runs 0-10 (printed) and is compared x10;
# the units score 1.3, so 2.0 catches any hardening line that goes missing.
MAX_EXPOSURE_X10 = 20
TOOL_TIMEOUT_SECONDS = 60
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"packaging-test-key-32-bytes-long").decode()


# --------------------------------------------------------------------- helpers


def _tool(name: str) -> str:
    """The tool's path, also looking beside this interpreter (a virtualenv's bin)."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip(f"{name} is not installed on this machine")
    return found


class _RepeatedKeys(dict[str, Any]):
    """A configparser section that keeps repeated keys, as systemd does.

    systemd reads `SystemCallFilter=` or `EnvironmentFile=` given twice as two
    values; configparser (strict=False) would keep the last. Collected here,
    they come out newline-joined.
    """

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, list) and isinstance(self.get(key), list):
            super().__getitem__(key).extend(value)
        else:
            super().__setitem__(key, value)


def _unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(
        strict=False,
        interpolation=None,
        delimiters=("=",),
        comment_prefixes=("#", ";"),
        dict_type=_RepeatedKeys,
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # case-sensitive
    parser.read_string((SYSTEMD / name).read_text("utf-8"), source=name)
    return parser


def _values(unit: configparser.ConfigParser, section: str, key: str) -> list[str]:
    return unit[section].get(key, "").splitlines()


def _seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|min)?", text.strip())
    assert match, f"unexpected time span {text!r}"
    return float(match[1]) * (60 if match[2] == "min" else 1)


def _instructions() -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of the Dockerfile, continuation lines joined."""
    logical: list[str] = []
    pending = ""
    for line in DOCKERFILE.read_text("utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1]) for text in logical]


def _only(keyword: str) -> list[str]:
    return [args for key, args in _instructions() if key == keyword]


def _active_env_lines() -> dict[str, str]:
    assignments = {}
    for line in ENV_EXAMPLE.read_text("utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, sep, value = line.partition("=")
            assert sep and re.fullmatch(r"[A-Z_][A-Z0-9_]*", name), f"not KEY=value: {line!r}"
            assignments[name] = value
    return assignments


# --------------------------------------------------------------------- example config


def test_example_config_loads() -> None:
    settings = load_settings(CONFIG_EXAMPLE, env={})
    assert settings.config_path == CONFIG_EXAMPLE
    assert settings.results_dir == Path("/var/lib/jobwarden/results")
    assert "{provider}" in settings.public_webhook_url
    assert list(settings.providers) == ["sim"]
    assert settings.providers["sim"].preset == "simulator"


def test_example_config_shows_every_setting() -> None:
    table = tomllib.loads(CONFIG_EXAMPLE.read_text("utf-8"))["jobwarden"]
    text = CONFIG_EXAMPLE.read_text("utf-8")
    # worker_id must stay unset (unique per process by default): shown commented.
    assert set(table) == set(SETTING_VARIABLES) - {"worker_id"}
    assert "# worker_id = " in text
    for key, variable in SETTING_VARIABLES.items():
        assert variable in text, f"{key}: its variable {variable} is not named"


def test_example_config_values_match_the_defaults_it_claims() -> None:
    table = tomllib.loads(CONFIG_EXAMPLE.read_text("utf-8"))["jobwarden"]
    defaults = Settings()
    # paths and URLs a deployment chooses are shown with deployment values, not defaults
    deployment = {
        "results_dir",
        "public_webhook_url",
        "log_checkpoint_dir",
        "log_signing_key_file",
        "log_previous_key_files",
    }
    shown_as_default = set(table) - deployment
    for key in shown_as_default:
        assert table[key] == getattr(defaults, key), f"{key}: example differs from the default"


def _uncommented_example(name: str, tmp_path: Path) -> Path:
    """The block `# BEGIN EXAMPLE <name>` ... `# END EXAMPLE <name>`, uncommented, as a file."""
    text = CONFIG_EXAMPLE.read_text("utf-8")
    block = re.search(rf"^# BEGIN EXAMPLE {name}\n(.*?)^# END EXAMPLE {name}", text, re.S | re.M)
    assert block is not None, f"no {name} example"
    lines = block[1].splitlines()
    assert all(line.startswith("#") for line in lines)
    uncommented = tmp_path / f"{name.lower()}.toml"
    uncommented.write_text("\n".join(line[2:] for line in lines), "utf-8")
    return uncommented


def test_commented_preset_example_loads(tmp_path: Path) -> None:
    path = _uncommented_example("PRESET", tmp_path)
    env = {"OPENAI_API_KEY": "test-key", "OPENAI_WEBHOOK_SECRET": WEBHOOK_SECRET}
    openai = load_settings(path, env=env).providers["openai"]
    assert openai.preset == "openai_batch"
    assert openai.auth is not None and openai.webhooks is not None
    assert openai.limits.max_concurrency == 4


def test_commented_provider_example_loads(tmp_path: Path) -> None:
    path = _uncommented_example("PROVIDER", tmp_path)
    env = {"ACME_API_KEY": "test-key", "ACME_WEBHOOK_SECRET": WEBHOOK_SECRET}
    acme = load_settings(path, env=env).providers["acme"]
    assert acme.auth is not None
    assert acme.webhooks is not None and len(acme.webhooks.secrets) == 1
    assert acme.lookup.supported and acme.cancel.supported


# --------------------------------------------------------------------- env file


def test_env_example_names_every_variable() -> None:
    text = ENV_EXAMPLE.read_text("utf-8")
    expected = {*SETTING_VARIABLES.values(), "DATABASE_URL", "JW_CONFIG", "JW_LOG_LEVEL"}
    missing = sorted(v for v in expected if not re.search(rf"^#?{v}=", text, re.M))
    assert missing == []


def test_env_example_is_a_valid_environment_file_with_no_secret() -> None:
    active = _active_env_lines()
    assert active == {"JW_CONFIG": "/etc/jobwarden/jobwarden.toml"}
    for line in ENV_EXAMPLE.read_text("utf-8").splitlines():
        name, _, value = line.lstrip("# ").partition("=")
        variable = re.fullmatch(r"[A-Z_][A-Z0-9_]*", name)
        if variable and re.search(r"(KEY|SECRET|PASSWORD)$", name) and value:
            assert "REPLACE" in value, f"{name} holds a value that is not a placeholder"
        for password in re.findall(r"://[^:/@\s]+:([^@\s]+)@", line):
            assert password == "REPLACE_ME", f"a URL in {line!r} carries a password"


# --------------------------------------------------------------------- systemd units


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_is_a_notify_service_with_watchdog_and_restart(name: str) -> None:
    service = _unit(name)["Service"]
    assert service["Type"] == "notify"
    assert service["NotifyAccess"] == "main"
    assert _seconds(service["WatchdogSec"]) >= 10  # the daemons ping every half of it
    assert service["Restart"] == "on-failure"
    assert service["KillSignal"] == "SIGTERM"
    # the receiver faces the internet: a user of its own, so it cannot read the
    # reconciler's environment (/proc) or the files it owns (the signing key)
    assert service["User"] == ("jobwarden-receiver" if RECEIVER in name else "jobwarden")


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_is_hardened(name: str) -> None:
    unit = _unit(name)
    service = unit["Service"]
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "CapabilityBoundingSet": "",
    }.items():
        assert service[key] == value, key
    assert _values(unit, "Service", "SystemCallFilter")[0] == "@system-service"
    if RECEIVER in name:  # writes no file, and sees neither the state nor the keys
        assert "StateDirectory" not in service and "ReadWritePaths" not in service
        assert service["InaccessiblePaths"] == "-/var/lib/jobwarden -/etc/jobwarden/keys"
    else:
        assert service["StateDirectory"] == "jobwarden"
        assert service["ReadWritePaths"] == "/var/lib/jobwarden"


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_stop_timeout_exceeds_the_shutdown_grace(name: str) -> None:
    timeout = _seconds(_unit(name)["Service"]["TimeoutStopSec"])
    assert timeout >= Settings().shutdown_grace + 5  # the grace, then releasing leases


@pytest.mark.parametrize("name", sorted(UNITS))
def test_unit_runs_its_daemon_and_refuses_to_start_without_a_database(name: str) -> None:
    unit = _unit(name)
    binary, *argv = unit["Service"]["ExecStart"].split()
    assert binary == INSTALLED_BINARY
    assert argv == [UNITS[name]]
    build_parser().parse_args(argv)  # a command the CLI knows
    assert _values(unit, "Service", "EnvironmentFile")[0] == "/etc/jobwarden/jobwarden.env"
    guard = unit["Service"]["ExecStartPre"]
    assert "$$DATABASE_URL" in guard  # `$$`: sh expands it, systemd does not log it


def test_unit_refusal_guard_fails_without_database_url_and_passes_with_it() -> None:
    script = _unit("jobwarden-receiver.service")["Service"]["ExecStartPre"]
    command = script.removeprefix("/bin/sh -c ").strip("'").replace("$$", "$")
    bare = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    refused = subprocess.run(
        ["/bin/sh", "-c", command], env=bare, capture_output=True, text=True, check=False
    )
    assert refused.returncode == 1
    assert "DATABASE_URL is not set" in refused.stderr
    url = "postgresql://jw_receiver:hunter2@db/jobwarden"
    accepted = subprocess.run(
        ["/bin/sh", "-c", command],
        env={**bare, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        check=False,
    )
    assert accepted.returncode == 0
    assert "hunter2" not in accepted.stdout + accepted.stderr


def test_template_unit_matches_the_plain_reconciler_unit() -> None:
    plain, template = _unit("jobwarden-reconciler.service"), _unit("jobwarden-reconciler@.service")
    differing = {"Description", "SyslogIdentifier"}
    for section in ("Unit", "Service", "Install"):
        left = {k: v for k, v in plain[section].items() if k not in differing}
        right = {k: v for k, v in template[section].items() if k not in differing}
        assert left == right, section
    assert "%i" in template["Service"]["SyslogIdentifier"]


@pytest.fixture
def verifiable_units(tmp_path: Path) -> Iterator[list[Path]]:
    """The units with ExecStart pointing at the installed entry point (verify checks it)."""
    entry_point = _tool("jobwarden")
    copies = []
    for name in sorted(UNITS):
        text = (SYSTEMD / name).read_text("utf-8").replace(INSTALLED_BINARY, entry_point)
        copy = tmp_path / name
        copy.write_text(text, "utf-8")
        copies.append(copy)
    yield copies


def test_systemd_analyze_verify_accepts_the_units(verifiable_units: list[Path]) -> None:
    analyze = _tool("systemd-analyze")
    done = subprocess.run(
        [analyze, "verify", *map(str, verifiable_units)],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "jobwarden" not in done.stdout + done.stderr  # no complaint names our units


@pytest.mark.parametrize("name", sorted(UNITS))
def test_systemd_analyze_security_rates_the_units_well_hardened(
    name: str, verifiable_units: list[Path]
) -> None:
    analyze = _tool("systemd-analyze")
    path = next(p for p in verifiable_units if p.name == name)
    done = subprocess.run(
        [analyze, "security", "--offline=true", f"--threshold={MAX_EXPOSURE_X10}", str(path)],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECONDS,
        check=False,
    )
    overall = [line for line in done.stdout.splitlines() if "Overall exposure" in line]
    assert done.returncode == 0, overall or done.stderr


# --------------------------------------------------------------------- Dockerfile


def test_dockerfile_is_multi_stage() -> None:
    stages = _only("FROM")
    assert len(stages) >= 2
    assert stages[0].endswith(" AS builder")
    assert all("${PYTHON_IMAGE}" in s for s in stages)
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in DOCKERFILE.read_text("utf-8")
    runtime = [args for key, args in _instructions()[_last_from_index() :] if key == "RUN"]
    assert any("from=builder" in args for args in runtime), "runtime installs the built wheels"


def _last_from_index() -> int:
    return max(i for i, (key, _) in enumerate(_instructions()) if key == "FROM")


def test_dockerfile_runs_as_a_non_root_user_before_its_command() -> None:
    steps = _instructions()
    runtime = steps[_last_from_index() :]
    users = [i for i, (key, _) in enumerate(runtime) if key == "USER"]
    commands = [i for i, (key, _) in enumerate(runtime) if key in ("CMD", "ENTRYPOINT")]
    assert users and commands and users[-1] < min(commands)
    user = runtime[users[-1]][1].split(":")[0]
    assert user not in ("root", "0")
    uid = re.search(r"ARG JW_UID=(\d+)", DOCKERFILE.read_text("utf-8"))
    assert user == "${JW_UID}" and uid is not None and int(uid[1]) >= 1000


def test_dockerfile_entrypoint_defaults_to_the_receiver() -> None:
    assert [json.loads(a) for a in _only("ENTRYPOINT")] == [["jobwarden"]]
    assert [json.loads(a) for a in _only("CMD")] == [["receiver"]]
    build_parser().parse_args(["receiver"])
    assert _only("EXPOSE") == ["8080"]
    env = " ".join(_only("ENV"))
    assert "JW_RECEIVER_HOST=0.0.0.0" in env
    assert "JW_RESULTS_DIR=/var/lib/jobwarden/results" in env
    assert _only("VOLUME") == ['["/var/lib/jobwarden/results"]']


def _healthcheck_argv() -> list[str]:
    (healthcheck,) = _only("HEALTHCHECK")
    assert "--interval=" in healthcheck and "--timeout=" in healthcheck
    argv = json.loads(healthcheck.split(" CMD ", 1)[1])
    assert argv[:2] == ["python", "-c"] and "/healthz" in argv[2] and "8080" in argv[2]
    return [sys.executable, *argv[1:]]


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    _Health.status = 200


def _run_healthcheck(port: int, **extra_env: str) -> int:
    env = {**os.environ, "JW_RECEIVER_PORT": str(port), **extra_env}
    done = subprocess.run(
        _healthcheck_argv(), env=env, capture_output=True, timeout=30, check=False
    )
    return done.returncode


def test_healthcheck_passes_when_healthz_answers(health_server: ThreadingHTTPServer) -> None:
    assert _run_healthcheck(health_server.server_address[1]) == 0


def test_healthcheck_ignores_proxy_settings(health_server: ThreadingHTTPServer) -> None:
    closed = "http://127.0.0.1:9"  # discard port: nothing listens
    port = health_server.server_address[1]
    assert _run_healthcheck(port, http_proxy=closed, HTTP_PROXY=closed, no_proxy="") == 0


def test_healthcheck_fails_when_healthz_answers_an_error(
    health_server: ThreadingHTTPServer,
) -> None:
    _Health.status = 503
    assert _run_healthcheck(health_server.server_address[1]) != 0


def test_healthcheck_fails_when_nothing_listens(health_server: ThreadingHTTPServer) -> None:
    port = health_server.server_address[1]
    health_server.shutdown()
    health_server.server_close()
    assert _run_healthcheck(port) != 0


def test_dockerignore_admits_everything_the_build_copies() -> None:
    rules = [
        line.strip()
        for line in DOCKERIGNORE.read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert rules[0] == "*", "an allowlist: nothing enters the build context unless named"
    admitted = {rule[1:].rstrip("/") for rule in rules if rule.startswith("!")}
    copied: set[str] = set()
    for args in _only("COPY"):
        if "--from=" not in args:
            *sources, _ = args.split()
            copied.update(s.rstrip("/") for s in sources)
    assert copied <= admitted
    assert all((ROOT / source).exists() for source in copied)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    packages = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {p.rstrip("*") for p in packages} | {"pyproject.toml", "README.md"} <= copied


def test_hadolint_accepts_the_dockerfile() -> None:
    hadolint = _tool("hadolint")
    done = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --------------------------------------------------------------------- extras, license, docs


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))


def _installed_requirements() -> list[Requirement]:
    return [Requirement(text) for text in importlib.metadata.requires("jobwarden") or []]


def test_embedded_postgres_is_an_extra_not_a_dependency() -> None:
    project = _pyproject()["project"]
    assert not [d for d in project["dependencies"] if Requirement(d).name == "pgserver"]
    assert [Requirement(d).name for d in project["optional-dependencies"]["embedded"]] == [
        "pgserver"
    ]
    # What pip resolves the image from: the installed metadata, not the TOML.
    (pgserver,) = [r for r in _installed_requirements() if r.name == "pgserver"]
    assert pgserver.marker is not None
    assert pgserver.marker.evaluate({"extra": "embedded"})
    assert not pgserver.marker.evaluate({"extra": ""})


def test_make_setup_installs_the_embedded_extra() -> None:
    # -n: print what setup would run; -W: as if pyproject.toml had just changed.
    done = subprocess.run(
        ["make", "-n", "-W", "pyproject.toml", "setup"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    installs = [line for line in done.stdout.splitlines() if "pip install" in line and "-e" in line]
    assert len(installs) == 1 and "embedded" in installs[0] and "dev" in installs[0]


def test_the_image_leaves_the_embedded_extra_out_and_fails_if_it_slips_in() -> None:
    runs = _only("RUN")
    for args in runs:  # the pip commands (the guard after them names pgserver)
        pip = args.split("&&")[0]
        assert "embedded" not in pip and "pgserver" not in pip, pip
    (install,) = [args for args in runs if "/wheels/jobwarden-*.whl" in args]
    argv = shlex.split(install.split("&& ", 1)[1])
    assert argv[:2] == ["python", "-c"] and "pgserver" in argv[2]
    present = subprocess.run([sys.executable, "-c", argv[2]], timeout=30, check=False)
    assert present.returncode != 0, "the guard passes an image that holds pgserver"
    hidden = "import sys; sys.modules['pgserver'] = None; " + argv[2]
    absent = subprocess.run([sys.executable, "-c", hidden], timeout=30, check=False)
    assert absent.returncode == 0, "the guard fails an image without pgserver"


def test_license_is_an_spdx_expression() -> None:
    pyproject = _pyproject()
    assert pyproject["project"]["license"] == "Apache-2.0"
    (setuptools,) = [
        Requirement(r) for r in pyproject["build-system"]["requires"] if r.startswith("setuptools")
    ]
    assert not setuptools.specifier.contains("76.9"), "SPDX license strings need setuptools 77"
    assert importlib.metadata.metadata("jobwarden")["License-Expression"] == "Apache-2.0"
    labels = " ".join(_only("LABEL"))
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in labels


def test_healthcheck_tells_oci_builders_to_keep_it() -> None:
    """buildah and podman drop HEALTHCHECK from OCI images; the Dockerfile says how to keep it."""
    lines = DOCKERFILE.read_text("utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("HEALTHCHECK"))
    comment = []
    for line in reversed(lines[:at]):
        if not line.startswith("#"):
            break
        comment.append(line)
    text = " ".join(comment)
    assert "--format docker" in text and "podman" in text and "buildah" in text


def test_readme_documents_the_database_and_demo_variables() -> None:
    """Every variable the database selection and the demo read has a row in the README."""
    read = re.compile(r"""(?:environ\.get|env\.get|env\[|environ\[)\(?["'](JW_[A-Z0-9_]+)""")
    sources = [*(ROOT / "shared" / "db").glob("*.py"), ROOT / "shared/cli/demo.py"]
    sources.append(ROOT / "shared/cli/main.py")
    variables = {v for path in sources for v in read.findall(path.read_text("utf-8"))}
    assert {"JW_LOCAL_PG_HOST", "JW_LOCAL_PG_PORT", "JW_DEMO_DATABASE"} <= variables
    readme = (ROOT / "README.md").read_text("utf-8")
    reference = readme.split("## Configuration reference", 1)[1].split("\n## ", 1)[0]
    assert sorted(v for v in variables if f"`{v}`" not in reference) == []


# --------------------------------------------------------------------- login roles


def _roles_script(prefix: str) -> str:
    """The script with its login roles renamed, so a test never touches real ones."""
    return ROLES_SQL.read_text("utf-8").replace("'jw_", f"'{prefix}")


async def _drop_roles(admin: Any, prefix: str) -> None:
    names = await admin.fetch("SELECT rolname FROM pg_roles WHERE rolname LIKE $1", prefix + "%")
    for row in names:
        await admin.execute(f'DROP ROLE IF EXISTS "{row["rolname"]}"')


async def _require_superuser(admin: Any) -> None:
    if not await admin.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        pytest.skip("the test server's admin role is not a superuser: cannot create roles")


async def test_login_roles_script_grants_each_daemon_its_group(
    pg_server: ResolvedDatabase, db_url: str
) -> None:
    prefix = f"jwpk{os.getpid()}_"
    admin = await connect(pg_server.admin_url)
    conn = await connect(db_url)
    try:
        await _require_superuser(admin)
        await conn.execute(_roles_script(prefix))
        await conn.execute(_roles_script(prefix))  # a second run changes nothing
        rows = await conn.fetch(
            """
            SELECT r.rolname, r.rolcanlogin, r.rolsuper, r.rolcreaterole, r.rolconfig,
                   array_agg(g.rolname ORDER BY g.rolname) AS groups
            FROM pg_roles r
            JOIN pg_auth_members m ON m.member = r.oid
            JOIN pg_roles g ON g.oid = m.roleid
            WHERE r.rolname LIKE $1
            GROUP BY r.oid, r.rolname, r.rolcanlogin, r.rolsuper, r.rolcreaterole, r.rolconfig
            """,
            prefix + "%",
        )
        by_name = {row["rolname"].removeprefix(prefix): row for row in rows}
        assert {name: row["groups"] for name, row in by_name.items()} == {
            "receiver": ["jobwarden_receiver"],
            "reconciler": ["jobwarden_reconciler"],
            "agent": ["jobwarden_agent"],
            "operator": ["jobwarden_operator"],
            "console": ["jobwarden_operator"],
        }
        assert all(r["rolcanlogin"] and not r["rolsuper"] for r in rows)
        assert not any(r["rolcreaterole"] for r in rows)
        assert "default_transaction_read_only=on" in by_name["agent"]["rolconfig"]
        assert "statement_timeout=10s" in by_name["agent"]["rolconfig"]
        public_connect = await conn.fetchval(
            "SELECT has_database_privilege('public', current_database(), 'CONNECT')"
        )
        assert public_connect is False
    finally:
        await conn.close()
        await _drop_roles(admin, prefix)
        await admin.close()


@contextlib.asynccontextmanager
async def _owner_install(pg_server: ResolvedDatabase, prefix: str) -> AsyncIterator[Any]:
    """The documented install: an owner role that is no superuser, its database, the
    roles script; yields a connection to it, acting as the owner, migrated."""
    owner, database = f"{prefix}owner", f"{prefix}db"
    admin = await connect(pg_server.admin_url)
    try:
        await _require_superuser(admin)
        await admin.execute(f'CREATE ROLE "{owner}" LOGIN')
        await admin.execute(f'CREATE DATABASE "{database}" OWNER "{owner}"')
        conn = await connect(with_database(pg_server.admin_url, database))
        try:
            await conn.execute(_roles_script(prefix))
            await conn.execute(f'SET ROLE "{owner}"')  # a superuser no more
            assert await apply_migrations(conn)
            yield conn
        finally:
            await conn.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await _drop_roles(admin, prefix)
        await admin.close()


async def test_migrate_runs_as_an_unprivileged_database_owner(
    pg_server: ResolvedDatabase,
) -> None:
    """The documented install: owner role + this script, then `migrate` as the owner."""
    async with _owner_install(pg_server, f"jwpo{os.getpid()}_") as conn:
        await conn.execute(f'SET ROLE "jwpo{os.getpid()}_agent"')
        await conn.fetch("SELECT * FROM agent_operations")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.fetch("SELECT * FROM operations")


async def test_the_owner_may_wake_operations_after_the_documented_install(
    pg_server: ResolvedDatabase,
) -> None:
    """The SECURITY DEFINER functions run as the owner, and one wakes operations.

    jw_attach_early_events (migration 031) calls jw_request_wakes, hence
    pg_notify, as the owner whenever a job id is recorded for which webhook
    events arrived first. The roles script revokes pg_notify from PUBLIC: an
    owner that is not a superuser then failed that recording with "permission
    denied for function pg_notify" on every retry (the reconciler's step
    failed, the operation stayed in create_unknown).
    """
    async with _owner_install(pg_server, f"jwpn{os.getpid()}_") as conn:
        # What jw_attach_early_events does as the owner, for any operation id.
        assert await conn.fetchval("SELECT jw_request_wakes(ARRAY['op_none'])") == 1
