# Worker image for Flywheel on Dataflow (Runner v2) or Flink (--environment_type=DOCKER):
# Beam's own Python SDK container, plus bubblewrap and Flywheel with its dependencies.
#
#   docker build -f deploy/worker.Dockerfile -t REGION-docker.pkg.dev/PROJECT/flywheel/worker:TAG .
#   docker push REGION-docker.pkg.dev/PROJECT/flywheel/worker:TAG
#   flywheel run ... --runner DataflowRunner --sdk_container_image REGION-docker.pkg.dev/PROJECT/flywheel/worker:TAG
#
# The `local` sandbox backend needs user namespaces inside this container; Dataflow's default
# worker containers do not allow them, so on Dataflow run attempts on a sandbox pool instead:
# `--sandbox remote --sandbox-options "urls=http://POOL:8700,token_file=/secrets/token"`
# (see docs/RUNNERS.md). The image is the same either way.
ARG BEAM_VERSION=2.77.0
FROM apache/beam_python3.11_sdk:${BEAM_VERSION}

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/flywheel
COPY pyproject.toml README.md ./
COPY registry registry
COPY schemas schemas
COPY sandbox sandbox
COPY domains domains
COPY verifiers verifiers
COPY trainer trainer
COPY transforms transforms
COPY pipelines pipelines
# torch's CPU build (the pin of pyproject.toml); a GPU image would take the CUDA build instead
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu ".[hf]"

# Beam's SDK harness is the entry point, as in the base image.
ENTRYPOINT ["/opt/apache/beam/boot"]
