# The lambdalake image: Airflow 3 + the runtime lock (requirements.txt) + Java 17 + the resolved
# JVM jars
# (a JDK: setup compiles the project's Delta log store for object storage) + the web assets
# of Data Docs and the query API's /docs (npm: setup packs them from the npm registry).
# The schema registry runs from its own image (compose's schema-registry), so setup is told
# its URL and looks for no Java 21 here.
# docker-compose.yml runs every lambdalake service from it (Airflow components and the Spark
# master/worker), so drivers and executors share one Python and one classpath.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jdk-headless maven npm \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
USER airflow
WORKDIR /opt/lambdalake
# the runtime lock only (no test or lint tools), hash-checked; then the project on top of it
COPY --chown=airflow requirements.txt ./
RUN pip install --no-cache-dir --require-hashes -r requirements.txt
COPY --chown=airflow . .
RUN pip install --no-cache-dir --no-deps -e . \
 && LAMBDALAKE_STATE_DIR=/tmp/lambdalake-build LAMBDALAKE_JARS_DIR=/opt/lambdalake-jars \
    LAMBDALAKE_WEB_ASSETS_DIR=/opt/lambdalake-web-assets \
    LAMBDALAKE_REGISTRY__URL=http://schema-registry:8080/apis/ccompat/v7 lambdalake setup
