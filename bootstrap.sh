#!/usr/bin/env bash
# Set up everything on a fresh Linux machine and run the main job.
#
#   ./bootstrap.sh [RUN OPTIONS] install, then run the main job (cluster + workload + faults)
#   ./bootstrap.sh --setup-only install only (what CI uses before running the tests)
#
# Installs: iptables (Debian package, for partitions inside node namespaces), chromium and
# chromium-driver (Debian packages, for the report tests), a Python
# virtualenv in .venv with the project and its test extras, Apache Kafka's jars (Maven, from
# Maven Central) and toxiproxy's server (Go module) into ~/.cache/kafka-harness.
set -euo pipefail
cd "$(dirname "$0")"

need() { command -v "$1" >/dev/null 2>&1 || { echo "error: $1 not found: $2" >&2; exit 2; }; }
need python3 "install Python 3.11+"
need java "install a JDK 17+ (e.g. apt-get install openjdk-17-jdk-headless)"
need mvn "install Apache Maven (e.g. apt-get install maven)"
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || { echo "error: go not found: install Go 1.21+" >&2; exit 2; }

if [ "$(id -u)" = 0 ] && ! command -v iptables >/dev/null 2>&1; then
  echo "== installing iptables (Debian package)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iptables) >/dev/null
fi

# Headless Chromium opens the HTML reports in the tests (harness/report/browser.py).
if [ "$(id -u)" = 0 ] && ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  echo "== installing chromium and chromium-driver (Debian packages)"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  python3 -m venv .venv
fi
echo "== installing the project into .venv"
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev,spark,docker]'

echo "== installing Kafka and toxiproxy"
.venv/bin/python -m harness install

if [ "${1:-}" = "--setup-only" ]; then
  exit 0
fi

echo "== main job: a 60 s eos run on a fresh 3-node cluster under every kind of fault"
exec .venv/bin/python -m harness run --workload eos --nemesis all --time-limit 60 "$@"
