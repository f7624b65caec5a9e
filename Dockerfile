# syntax=docker/dockerfile:1
# The aiadmit webhook image: `docker build -t aiadmit:dev .`
#
# - Base pinned by digest (python 3.11.13, Debian bookworm, slim; the multi-arch index digest): a rebuild gets
#   the same bytes until someone changes this line on purpose. To update: `docker buildx imagetools inspect
#   python:3.11-slim-bookworm` and replace both the tag and the digest.
# - Two stages: wheels for aiadmit and its runtime dependencies are built in the first; the second installs them
#   from a bind mount (no wheel files, no build tools, no pip cache left in a layer): aiadmit[webhook] (the server's
#   dependencies are an extra, so that the command-line audit installs without them), without the [test] extra.
# - Runs as uid/gid 65532, and writes nothing outside /tmp: the Deployment mounts the root filesystem read-only
#   and an emptyDir on /tmp (bytecode is compiled at install time, PYTHONDONTWRITEBYTECODE stops any later write).
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
# The built-in bundle: pyproject packages policies/ into the wheel as webhook/policies.
COPY policies ./policies
RUN python -m pip wheel --wheel-dir /wheels '.[webhook]'

FROM ${PYTHON_IMAGE}
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/aiadmit/bin:$PATH
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/aiadmit \
    && /opt/aiadmit/bin/python -m pip install --no-index --find-links=/wheels 'aiadmit[webhook]' \
    && /opt/aiadmit/bin/python -m pip uninstall --yes pip \
    && groupadd --system --gid 65532 aiadmit \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin aiadmit
USER 65532:65532
WORKDIR /tmp
EXPOSE 8443
ENTRYPOINT ["aiadmit", "serve"]
