# The crawler's SDK worker image for Dataflow (and, from a later issue, the Flex Template launcher).
# It cannot be built on the development machines (no Docker engine); keep it correct by review.
#
# The Beam version here must match requirements.txt (apache-beam[gcp]==2.77.0) and templates/.
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

# Workers start through Beam's boot program, as in the base image.
ENTRYPOINT ["/opt/apache/beam/boot"]
