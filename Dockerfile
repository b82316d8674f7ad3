# The knowledge application image: one image, the role chosen by the command
# (`worker`, `writer`, `serve`, `index`); see docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY config ./config
COPY pipeline ./pipeline
COPY workers ./workers
COPY query ./query
COPY cli ./cli
RUN pip install . && useradd --system --uid 10001 --home-dir /data knowledge \
    && mkdir -p /data /published && chown knowledge /data /published

USER knowledge
WORKDIR /data
ENTRYPOINT ["knowledge"]
CMD ["--help"]
