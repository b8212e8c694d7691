#!/usr/bin/env bash
# Install everything oncelog's demo and tests need, on a fresh Debian/Ubuntu machine.
# Idempotent: a second run only checks. Used by `make setup` (and so by `make demo`/`make test`).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# kcat: one of the five real clients the integration tests use
DEBIAN_PACKAGES=(kcat)
# PySpark runs on a JVM: Spark 4 needs Java 17 or newer.
if ! java -version 2>&1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])'; then
    DEBIAN_PACKAGES+=(openjdk-17-jre-headless)
fi
# tests/integration/test_java_client.py compiles a small program against the Apache Kafka Java
# client (whose jars come from the java-client extra below): it needs javac, not just a JRE.
if ! javac -version 2>&1 | grep -Eq 'javac (1[7-9]|[2-9][0-9])'; then
    DEBIAN_PACKAGES+=(openjdk-17-jdk-headless)
fi
# The PostgreSQL sink's tests start a real server (initdb + postgres) of their own.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    DEBIAN_PACKAGES+=(postgresql)
fi
# Cluster mode (`oncelog cluster start`, tests/cluster) runs a real Apache ZooKeeper 3.8 from
# Debian's jars on the JRE above (oncelog.cluster.zookeeper_process); the package starts no
# service of its own (that is zookeeperd).
DEBIAN_PACKAGES+=(zookeeper)
# oncelog.testing.apache_kafka runs a real Apache Kafka from its jars on the JRE above; Maven
# fetches them from Maven Central once (below) into ~/.cache/oncelog/apache-kafka/.
if ! command -v mvn >/dev/null 2>&1; then
    DEBIAN_PACKAGES+=(maven)
fi
# Network partitions (oncelog.cluster.isolation, tests/isolation): network namespaces and veth
# pairs with ip (iproute2), drops and the delay relay's redirects with nft (nftables).
DEBIAN_PACKAGES+=(nftables)
if ! command -v ip >/dev/null 2>&1; then
    DEBIAN_PACKAGES+=(iproute2)
fi
# tests/power_cut compiles a small LD_PRELOAD library (fsync_journal.c) that journals fsyncs,
# to simulate a power cut: it needs a C compiler and libc's headers.
if ! command -v cc >/dev/null 2>&1; then
    DEBIAN_PACKAGES+=(gcc libc6-dev)
fi

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
echo "setup: installing oncelog and its pinned dependencies into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,spark,postgresql,verify,java-client]'
# The pinned Apache Kafka's jars into the per-user cache now, so no test downloads them (quiet
# when they are there already).
.venv/bin/python -m oncelog.testing.fetch_apache_kafka --quiet
touch .venv/.installed
