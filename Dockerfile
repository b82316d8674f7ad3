# The knowledge application image: one image, the role chosen by the command (`worker`, `writer`,
# `serve`, `index`, `publish`, `check`, ...), since the entry point is `knowledge`; see docker-compose.yml.
#
#   docker build -t knowledge-pipeline .                      # python:3.11-slim, dependencies from PyPI
#   docker build --network none --pull=false \
#     --build-arg BASE_IMAGE=knowledge-base:bookworm \
#     --build-arg WHEELS=build/compose/wheels -t knowledge-pipeline .   # offline: a local base, local wheels
#
# BASE_IMAGE: any Debian-like image with python3 (>= 3.11) and its venv module. WHEELS: a directory of
# the build context holding the project's wheel and every dependency's, built for BASE_IMAGE's python
# (same version and ABI), installed with --no-index; left empty, the project is installed from the
# sources copied below (deploy/wheels holds no wheel) and its dependencies come from the index.
# tests/deploy/test_compose.py builds it the second way and runs the compose stack on it.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
ARG WHEELS=
LABEL knowledge.stage=build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY config ./config
COPY pipeline ./pipeline
COPY workers ./workers
COPY query ./query
COPY cli ./cli
COPY ${WHEELS:-deploy/wheels} /wheels/
RUN python3 -m venv /opt/knowledge \
    && if ls /wheels/*.whl >/dev/null 2>&1; then \
         /opt/knowledge/bin/pip install --no-index --find-links /wheels knowledge-pipeline; \
       else \
         /opt/knowledge/bin/pip install /src; \
       fi \
    && /opt/knowledge/bin/pip uninstall -y -q pip \
    && /opt/knowledge/bin/python -c "import cli, pipeline, query, workers, config"

FROM ${BASE_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/knowledge/bin:$PATH
COPY --from=build /opt/knowledge /opt/knowledge
COPY deploy/healthcheck.py /opt/knowledge/healthcheck.py
# A system user of its own (no login, no password); the store (/data) and the published generations
# (/published) are volumes it owns, so a fresh named volume takes that owner on first mount.
RUN useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin knowledge \
    && mkdir -p /data /published /replica \
    && chown knowledge:knowledge /data /published /replica
VOLUME ["/data", "/published"]
USER knowledge
WORKDIR /data
# `knowledge serve` (and a replica) is healthy when its /healthz answers; the other roles when alive.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["/opt/knowledge/bin/python", "/opt/knowledge/healthcheck.py"]
ENTRYPOINT ["knowledge"]
CMD ["--help"]
