# The image the Helm chart runs (chart/values.yaml: image.repository, tag = the chart's
# appVersion): the `infergate` command with the shipped CRDs, policies and example state as
# package data (see pyproject.toml). A v<version> tag makes .github/workflows/release.yaml build
# it for linux/amd64 and linux/arm64 and push ghcr.io/<owner>/infergate:<version>, e.g.
# ghcr.io/infergate/infergate:0.1.0. An unreleased build (docs/install.md, "The image"):
#   docker build -t localhost/infergate:dev .
# Air-gapped (docs/install.md): any Python 3.11+ image your registry holds as the base, and
# your package index mirror for the dependencies:
#   docker build --build-arg BASE=registry.internal/python:3.12-slim \
#     --build-arg PIP_INDEX_URL=https://pypi.internal/simple -t registry.internal/infergate:0.1.0 .
# The base must provide `python3 -m pip` and put its scripts directory on PATH (python:*-slim
# and a virtualenv whose bin/ is on PATH both do).
ARG BASE=python:3.12-slim

FROM ${BASE} AS build
# only the build stage downloads: the runtime stage installs from the wheels built here
ARG PIP_INDEX_URL=https://pypi.org/simple
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook webhook
COPY chart/crds chart/crds
COPY chart/files/crds chart/files/crds
COPY policies policies
COPY examples examples
RUN PIP_INDEX_URL="$PIP_INDEX_URL" python3 -m pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${BASE}
COPY --from=build /wheels /wheels
RUN python3 -m pip install --no-cache-dir --no-index --find-links /wheels infergate && rm -rf /wheels
# non-root, matching the chart's podSecurityContext; the root filesystem is mounted read-only
USER 65532:65532
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
EXPOSE 8443
ENTRYPOINT ["infergate"]
CMD ["serve"]
