# One image for everything that runs the crawler's code:
#   - the Dataflow Flex Template launcher (Dataflow starts the template launcher binary, which
#     runs FLEX_TEMPLATE_PYTHON_PY_FILE and returns once the job is submitted),
#   - the Dataflow SDK worker (pass it as sdk_container_image; the entrypoint is Beam's boot),
#   - the Beam worker pool beside Flink TaskManagers (args: --worker_pool) and the Flink driver.
# No Docker engine runs on the development machines; tests/unit/test_templates.py checks it.
#
# The Beam version here must match requirements.txt (apache-beam[gcp]==2.77.0), setup.py,
# templates/dataflow/metadata.json and templates/flink/k8s/flink-deployment.yaml.
ARG LAUNCHER_IMAGE=gcr.io/dataflow-templates-base/python311-template-launcher-base:latest
FROM ${LAUNCHER_IMAGE} AS launcher

FROM apache/beam_python3.11_sdk:2.77.0

WORKDIR /opt/crawler

# Dependencies first, so code changes do not invalidate the (large) dependency layer.
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

# The crawler itself: the `pipeline` and `transforms` packages and the `crawler` console script.
COPY setup.py ./
COPY pipeline ./pipeline
COPY transforms ./transforms
RUN pip install --no-cache-dir --no-deps .

# The Flex Template launcher binary and what it runs. Dependencies are already installed, so
# the launcher stages nothing: the job's workers use this same image.
COPY --from=launcher /opt/google/dataflow/python_template_launcher \
     /opt/google/dataflow/python_template_launcher
ENV FLEX_TEMPLATE_PYTHON_PY_FILE=/opt/crawler/pipeline/__main__.py
ENV PIP_NO_DEPS=True

# Workers start through Beam's boot program, as in the base image.
ENTRYPOINT ["/opt/apache/beam/boot"]
