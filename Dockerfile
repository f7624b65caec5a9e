# syntax=docker/dockerfile:1
# The aiadmit webhook image with Docker: `docker build -t aiadmit:dev .`
# Without Docker, manifests/image/build.sh builds the same layout from Debian packages (docs/operations.md, "Image").
#
# - Base: a build argument, pinned by digest by default (python 3.11.13, Debian bookworm, slim; the multi-arch index
#   digest): a rebuild gets the same bytes until someone changes this line on purpose. To update: `docker buildx
#   imagetools inspect python:3.11-slim-bookworm` and replace both the tag and the digest. Any CPython 3.11 image
#   with bash and pip works (`--build-arg PYTHON_IMAGE=your-mirror/python:3.11-slim-bookworm@sha256:...`).
# - The same wheels as build.sh: manifests/image/wheels.sh builds aiadmit's wheel and fetches the dependencies pinned
#   by sha256 in manifests/image/requirements.lock (and the pip of pip.lock, which runs from its wheel and is never
#   installed), in the first stage; the second installs them from a bind mount (no wheel files, no build tools, no
#   pip left in a layer): aiadmit[webhook] (the server's dependencies are an extra, so that
#   the command-line audit installs without them), without the [test] extra.
# - The same layout as build.sh: a venv at /opt/aiadmit made by `python3.11 -m venv` (the same interpreter links),
#   pip's direct_url.json of the local wheel dropped, bytecode compiled at build time (unchecked-hash: the root
#   filesystem is read-only at run time; a fixed hash seed, -f), uid/gid 65532, workdir /tmp, entrypoint
#   `aiadmit serve`, the same environment. tests/e2e/install/test_image.py checks that this file and build.sh agree
#   on each of these; tests/e2e/install/test_dockerfile.py builds this file with buildah and compares the images.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm@sha256:86adf8dbadc3d6e82ee5dd2c74bec2e1c2467cdad47886280501df722372d2e1

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
# The built-in bundle: pyproject packages policies/ into the wheel as webhook/policies.
COPY policies ./policies
COPY manifests/image ./manifests/image
RUN bash manifests/image/wheels.sh /wheels /src

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/aiadmit/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python3.11 -m venv --without-pip /opt/aiadmit \
    && pip_whl="$(ls /wheels/pip-*.whl)" \
    && PIP_NO_CACHE_DIR=1 /opt/aiadmit/bin/python "$pip_whl/pip" install -q --no-index --find-links=/wheels \
       --no-compile --require-hashes --no-deps -r /wheels/requirements.lock \
    && PIP_NO_CACHE_DIR=1 /opt/aiadmit/bin/python "$pip_whl/pip" install -q --no-index --no-compile --no-deps \
       /wheels/aiadmit-*.whl \
    && find /opt/aiadmit -name direct_url.json -path '*.dist-info/*' -delete \
    && find /opt/aiadmit -name RECORD -path '*.dist-info/*' -exec sed -i '/\.dist-info\/direct_url\.json,/d' {} + \
    && PYTHONHASHSEED=0 /opt/aiadmit/bin/python -m compileall -q -f --invalidation-mode unchecked-hash /opt/aiadmit \
    && groupadd --system --gid 65532 aiadmit \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin aiadmit
USER 65532:65532
WORKDIR /tmp
EXPOSE 8443
ENTRYPOINT ["aiadmit", "serve"]
