# The image the Helm chart runs (chart/values.yaml: image.repository): the `infergate` command
# with the shipped CRDs, policies and example state as package data (see pyproject.toml).
#   docker build -t ghcr.io/infergate/infergate:0.1.0 .
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook webhook
COPY chart/crds chart/crds
COPY chart/files/crds chart/files/crds
COPY policies policies
COPY examples examples
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.12-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels infergate && rm -rf /wheels
# non-root, matching the chart's podSecurityContext; the root filesystem is mounted read-only
USER 65532:65532
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
EXPOSE 8443
ENTRYPOINT ["infergate"]
CMD ["serve"]
