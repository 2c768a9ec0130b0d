# syntax=docker/dockerfile:1
# The opsd image: the yt-streaming-opsd package with its dependencies in a venv at a fixed path, Java 17,
# and `opsd-entrypoint` as the entrypoint: `opsd` with the arguments, or Spark's executor backend when Spark on
# Kubernetes starts an executor pod from this image (args `executor`; scripts/opsd-entrypoint). The chart (helm/opsd)
# runs it; tests/test_dockerfile.py checks this file against pyproject.toml and the chart, and scans it with checkov.
#
# The venv is at the same path in every container built from this image, so Spark executors on Kubernetes
# (same image) start Python with the driver's PYSPARK_PYTHON. It runs as the unprivileged user 1000 and works
# with a read-only root filesystem: the only paths written are the volumes below.
#
# Nothing is installed unpinned: every Python distribution comes from requirements.lock (the runtime dependencies
# with the `spyt` extra) or requirements-build.lock (setuptools, to build the package), each version pinned with
# its sha256 hashes and installed with --require-hashes and without build isolation (which would fetch build tools
# unpinned); the package itself is installed from the build context without dependencies or an index.
# `make lock` writes both files with pip-compile (pip-tools). The base image is pinned by tag and digest, and the
# JRE by its Debian 12 (bookworm) package version: see docs/security.md ("Renewing the image's pins") for how to
# renew both (`docker buildx imagetools inspect python:3.11.<patch>-slim-bookworm` prints the index's digest;
# `apt-cache policy openjdk-17-jre-headless` in the base image the JRE's version); tests/test_dockerfile.py checks
# that both stay pinned.

# Build stage: install the locked dependencies, then the package, into the venv.
FROM python:3.11.15-slim-bookworm@sha256:9c6f90801e6b68e772b7c0ca74260cbf7af9f320acec894e26fccdaccfbe3b47 AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/opsd/venv
WORKDIR /src
COPY requirements-build.lock requirements.lock ./
RUN /opt/opsd/venv/bin/pip install --require-hashes -r requirements-build.lock \
    && /opt/opsd/venv/bin/pip install --require-hashes --no-build-isolation -r requirements.lock
COPY pyproject.toml README.md ./
COPY streaming_core ./streaming_core
COPY opsd ./opsd
COPY scripts ./scripts
# The package alone: its dependencies (with the `spyt` extra: SPYT's YtFileSystem for yt:/// checkpoints on a real
# YTsaurus cluster) are the locked ones above.
RUN /opt/opsd/venv/bin/pip install --no-deps --no-index --no-build-isolation . \
    && /opt/opsd/venv/bin/python -m compileall -q /opt/opsd/venv

# Runtime stage: Java 17 JRE, the venv, an unprivileged user.
# The same base as the build stage: the venv's python links to its /usr/local/bin/python3.11.
FROM python:3.11.15-slim-bookworm@sha256:9c6f90801e6b68e772b7c0ca74260cbf7af9f320acec894e26fccdaccfbe3b47
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless=17.0.21.1+2-1~deb12u1 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 1000 opsd \
    && useradd --uid 1000 --gid 1000 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin opsd \
    && mkdir -p /var/lib/opsd/cluster /var/lib/opsd/spark-local /etc/opsd \
    && chown -R 1000:1000 /var/lib/opsd
COPY --from=build /opt/opsd/venv /opt/opsd/venv
# PYSPARK_PYTHON: the venv's Python for the Python processes Spark starts (scripts/yt-spark-python says why
# it is a wrapper). HOME and the Spark local dirs point at volumes: the root filesystem may be read-only.
ENV PATH=/opt/opsd/venv/bin:$PATH \
    PYSPARK_PYTHON=/opt/opsd/venv/bin/yt-spark-python \
    PYSPARK_DRIVER_PYTHON=/opt/opsd/venv/bin/python \
    HOME=/tmp \
    SPARK_LOCAL_DIRS=/var/lib/opsd/spark-local \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Writable paths: scratch space, Spark's shuffle and spill files, and the embedded cluster's root (the
# chart's default cluster is local:///var/lib/opsd/cluster).
VOLUME ["/tmp", "/var/lib/opsd/spark-local", "/var/lib/opsd/cluster"]
USER 1000:1000
WORKDIR /tmp
EXPOSE 9108
# The daemon answers /healthz while it runs (the chart's probes ask it too); 9108 is opsd's default port (`opsd.config.models.DEFAULT_PORT`).
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9108/healthz', timeout=4)"]
ENTRYPOINT ["opsd-entrypoint"]
CMD ["run", "/etc/opsd/config.yaml"]
