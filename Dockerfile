# syntax=docker/dockerfile:1
# jobwarden: one image for both daemons; the command chooses.
#
#   docker run ... jobwarden                 -> the receiver (default CMD)
#   docker run ... jobwarden reconciler      -> the reconciler
#   docker run ... jobwarden migrate         -> apply migrations (run as the schema owner)
#
# Always set DATABASE_URL: without it the daemons refuse to start, saying so.
# The embedded PostgreSQL of `make run` (the jobwarden[embedded] extra) is not
# in this image: a database private to one container is one nobody backs up.
#
# Build with Docker (BuildKit), or with buildah/podman in Docker format:
#   podman build --format docker -t jobwarden:0.1.0 .     (or BUILDAH_FORMAT=docker)
# The OCI format, their default, has no HEALTHCHECK: it would be dropped.
#
# Give the containers a stop timeout above JW_SHUTDOWN_GRACE
# (`--stop-timeout 30`, compose `stop_grace_period: 30s`): Docker's default of
# 10 s would SIGKILL a reconciler before it hands its leases back. That loses
# nothing (leases expire), but delays the operations it held.
# README.md has the whole recipe.

ARG PYTHON_IMAGE=python:3.11-slim

# ---------------------------------------------------------------- builder
# Builds jobwarden's wheel and the wheels of every dependency, so the runtime
# stage installs offline and carries no build tooling or pip cache.
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY shared ./shared
COPY receiver ./receiver
COPY reconciler ./reconciler
COPY sql ./sql
# With the otel extra's wheels, so OTEL_EXPORTER_OTLP_ENDPOINT works in the image.
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels '.[otel]'

# ---------------------------------------------------------------- runtime
FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="jobwarden" \
      org.opencontainers.image.description="Durable, auditable tracking of long-running jobs on third-party HTTP APIs" \
      org.opencontainers.image.licenses="Apache-2.0"

# A fixed, unprivileged uid/gid (not 1000, which often maps to a host user) so
# volume ownership is predictable and orchestrators can check runAsNonRoot.
ARG JW_UID=10001
RUN groupadd --system --gid "${JW_UID}" jobwarden \
    && useradd --system --uid "${JW_UID}" --gid jobwarden --no-create-home \
       --home-dir /var/lib/jobwarden --shell /usr/sbin/nologin jobwarden \
    && install -d -o jobwarden -g jobwarden -m 0750 \
       /var/lib/jobwarden /var/lib/jobwarden/results \
    && install -d -o root -g jobwarden -m 0750 /etc/jobwarden

# /wheels holds jobwarden's dependencies with the otel extra only; the check after the
# install fails the build if the embedded PostgreSQL ever slips in.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    python -m pip install --no-cache-dir --root-user-action=ignore --no-index \
        --find-links=/wheels "$(echo /wheels/jobwarden-*.whl)[otel]" \
    && python -c "import importlib.util as u, sys; sys.exit(u.find_spec('pgserver') is not None)"

# Listen on every interface inside the container (the default, 127.0.0.1, is
# for a host install behind a local reverse proxy). Results live on a volume so
# they survive the container; the database references them by path, so mount
# the volume at this same path everywhere.
# These variables beat a mounted jobwarden.toml (environment over file): its
# receiver_host, receiver_port and results_dir are ignored; override them with
# -e / compose `environment:` instead.
# No checkpoint volume and no signing key here: the evidence log's checkpoints
# default to /var/lib/jobwarden/var/checkpoints inside the container (lost when
# it is recreated) and none is signed without a key. README.md ("Docker") mounts
# a checkpoint directory and passes the key as a secret.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    JW_RECEIVER_HOST=0.0.0.0 \
    JW_RECEIVER_PORT=8080 \
    JW_RESULTS_DIR=/var/lib/jobwarden/results

WORKDIR /var/lib/jobwarden
VOLUME ["/var/lib/jobwarden/results"]
EXPOSE 8080

# Liveness of the receiver only (/healthz: the process answers). Readiness
# (/readyz: database reachable and migrated) is for the load balancer, not for
# restarts. The reconciler serves no HTTP: run it with --no-healthcheck
# (compose: `healthcheck: {disable: true}`). No curl in slim: Python's urllib
# raises on a non-2xx answer or a refused connection, which exits non-zero. No
# proxy (an http_proxy in the environment would otherwise catch 127.0.0.1).
# Docker image format only: buildah and podman drop it from an OCI image
# (their default) unless built with `--format docker`; `podman run
# --health-cmd` can give it back at run time.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.build_opener(u.ProxyHandler({})).open('http://127.0.0.1:' + os.environ.get('JW_RECEIVER_PORT', '8080') + '/healthz', timeout=4)"]

STOPSIGNAL SIGTERM
# Numeric, so an orchestrator can verify runAsNonRoot without reading /etc/passwd.
USER ${JW_UID}:${JW_UID}

ENTRYPOINT ["jobwarden"]
CMD ["receiver"]
