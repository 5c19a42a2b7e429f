# One image for both components: `corral-webhook` and `corral-descheduler` (and the
# `kubectl-corral` plugin) on the PATH. Build from the repository root:
#   docker build -t corral:0.1.0 .
# Only the runtime dependencies are installed, at the versions pinned in
# constraints.txt; the image runs as a non-root user (65532, as the manifests expect).

FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY shared/ shared/
COPY webhook/ webhook/
COPY descheduler/ descheduler/
COPY kubectl_corral/ kubectl_corral/
RUN python -m venv /opt/corral \
    && /opt/corral/bin/pip install --no-cache-dir --disable-pip-version-check \
        -c constraints.txt . \
    && /opt/corral/bin/pip uninstall --yes pip

FROM python:3.11-slim-bookworm
COPY --from=build /opt/corral /opt/corral
ENV PATH=/opt/corral/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# No entrypoint: each manifest names the command (corral-webhook, corral-descheduler).
CMD ["corral-webhook", "--help"]
