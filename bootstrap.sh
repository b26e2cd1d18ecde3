#!/usr/bin/env bash
# Set up everything on a fresh Linux machine and run the main job.
#
#   ./bootstrap.sh [RUN OPTIONS] install what the main job needs, run it (cluster + workload +
#                               faults + report), then build the rest
#   ./bootstrap.sh --setup-only install everything, run nothing (what CI uses before the tests)
#   --no-docker                 (with either) leave the Docker engine alone
#
# Before the main job: iptables (Debian package, for partitions inside node namespaces), a
# Python virtualenv in .venv with the project, Apache Kafka's jars (Maven, from Maven Central),
# toxiproxy's server (Go module) and the project's Java clients, into ~/.cache/kafka-harness.
# The rest, after the main job's verdict (or at once with --setup-only), for the other
# commands and the tests: the project's extras (Spark, Docker, SSH, docs, test tools);
# chromium and chromium-driver (Debian packages, for the report tests); the franz-go client
# (Go modules), KafkaJS and Confluent's JavaScript client (npm; the latter compiles its bundled
# librdkafka against Debian's libssl, libsasl2, libzstd, liblz4, zlib and libcurl development
# packages, installed here); the Streams application; the Kafka versions the tests run; as root
# on Debian/Ubuntu with no Docker engine answering, Debian's docker.io and debootstrap (the
# Docker backend builds its images from Debian packages, no registry needed), dockerd, and the
# images. Each of these is otherwise built on first use by the command that needs it.
set -euo pipefail
cd "$(dirname "$0")"

with_docker=1
setup_only=0
args=()
for a in "$@"; do
  case "$a" in
    --no-docker) with_docker=0 ;;
    --setup-only) setup_only=1 ;;
    *) args+=("$a") ;;
  esac
done
set -- ${args[@]+"${args[@]}"}

need() { command -v "$1" >/dev/null 2>&1 || { echo "error: $1 not found: $2" >&2; exit 2; }; }
need python3 "install Python 3.11+"
need java "install a JDK 17+ (e.g. apt-get install openjdk-17-jdk-headless)"
need mvn "install Apache Maven (e.g. apt-get install maven)"
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || { echo "error: go not found: install Go 1.26+ (toxiproxy and the franz-go client are built from their Go modules)" >&2; exit 2; }

if [ "$(id -u)" = 0 ] && ! command -v iptables >/dev/null 2>&1; then
  echo "== installing iptables (Debian package)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables) >/dev/null
fi

# Confluent's JavaScript client builds its native addon here (its prebuilt one is on GitHub):
# librdkafka's configure needs these libraries' headers.
install_js_dev_libs() {
  local js_dev_libs="libssl-dev libsasl2-dev libzstd-dev liblz4-dev zlib1g-dev libcurl4-openssl-dev"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
    && ! dpkg -s $js_dev_libs >/dev/null 2>&1; then
    echo "== installing librdkafka's build libraries (Debian packages)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $js_dev_libs) >/dev/null
  fi
}

engine_answers() { command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; }

# The Docker backend (harness/substrate/docker) needs an engine. Where none answers and we
# may install one (root, apt), install Debian's docker.io and start the daemon: under
# systemd through its unit, elsewhere (containers, CI runners without systemd) directly,
# logging to /var/log/dockerd.log. It stays running afterwards, as a system service would.
ensure_docker() {
  if engine_answers; then
    echo "== Docker engine answers: leaving it as it is"
  elif [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "== no Docker engine answers and this is not root on Debian/Ubuntu: not installing one" \
      "(the Docker backend and its tests are skipped)"
    return 0
  else
    if ! command -v dockerd >/dev/null 2>&1; then
      echo "== installing docker.io (Debian package) for the Docker backend"
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io) >/dev/null
    fi
    if [ -d /run/systemd/system ]; then
      echo "== starting dockerd (systemctl start docker)"
      systemctl start docker
    else
      echo "== starting dockerd in the background (log: /var/log/dockerd.log)"
      nohup dockerd >>/var/log/dockerd.log 2>&1 </dev/null &
    fi
    for _ in $(seq 1 60); do engine_answers && break; sleep 1; done
    engine_answers || { echo "error: dockerd did not answer within 60 s; see /var/log/dockerd.log" >&2; exit 2; }
    echo "== Docker engine answers"
  fi
  # docker/compose.yaml is brought up in a test; Debian ships Compose as docker-compose.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1 \
      && ! docker compose version >/dev/null 2>&1; then
    echo "== installing docker-compose (Debian package) for the compose test"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-compose) >/dev/null
  fi
  # The backend's base image is a Debian root file system made by debootstrap.
  if [ "$(id -u)" = 0 ] && ! command -v debootstrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    echo "== installing debootstrap (Debian package) to build the Docker backend's base image"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap) >/dev/null
  fi
}

# The rest: what other commands and the tests build on first use, built here once instead.
the_rest() {
  # Headless Chromium opens the HTML reports in the tests (harness/report/browser.py).
  if [ "$(id -u)" = 0 ] && ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
    echo "== installing chromium and chromium-driver (Debian packages)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null
  fi
  install_js_dev_libs
  if [ "$with_docker" = 1 ]; then
    ensure_docker
  else
    echo "== --no-docker: not checking for a Docker engine"
  fi
  echo "== installing the project's extras into .venv (Spark, Docker, SSH, docs, test tools)"
  .venv/bin/pip install -q --disable-pip-version-check -e '.[dev,spark,docker,ssh,docs]'
  echo "== building the clients, the Streams application, the tests' Kafka versions and images"
  .venv/bin/python -m harness install --all
}

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  python3 -m venv .venv
fi
echo "== installing the project into .venv"
.venv/bin/pip install -q --disable-pip-version-check -e .

echo "== installing Kafka, toxiproxy and the Java clients"
.venv/bin/python -m harness install

if [ "$setup_only" = 1 ]; then
  the_rest
  exit 0
fi

echo "== main job: a 60 s eos run on a fresh 3-node cluster under every kind of fault"
status=0
.venv/bin/python -m harness run --workload eos --nemesis all --time-limit 60 "$@" || status=$?
echo "== the main job's verdict is above (exit status $status); now building the rest" \
  "(Ctrl-C is safe: each part is otherwise built on first use)"
the_rest
exit "$status"
