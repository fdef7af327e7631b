# The operator image: `lifecycle run` on a slim Python base.
#   docker build -t registry.example/lifecycle:0.1.0 .
# It runs as a numeric non-root user and writes nothing outside /tmp, so it works
# with readOnlyRootFilesystem (mount an emptyDir at /tmp, as `lifecycle manifests` does).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp

WORKDIR /src
COPY pyproject.toml README.md ./
COPY lifecycle ./lifecycle
COPY machines ./machines
COPY providers ./providers
RUN pip install . && rm -rf /src

WORKDIR /tmp
USER 65532:65532

ENTRYPOINT ["lifecycle"]
CMD ["run"]
