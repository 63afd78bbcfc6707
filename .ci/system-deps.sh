#!/usr/bin/env bash
# Installs the system packages the test suite uses, only where missing (Debian; run as root in CI).
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
# the Flink integration tests compile their test job with javac
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
# Maven resolves the Apache Kafka broker's jars for tests/kafka_broker.py (cached in ~/.cache/tidegauge/kafka)
command -v mvn >/dev/null 2>&1 || need+=(maven)
# the Flink integration tests compile their test job with javac
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
if ! command -v postgres >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  need+=(postgresql)
fi
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
# the dashboard's browser tests drive Debian's Chromium with Playwright (`playwright install` cannot download)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# Azurite (the Azure Blob emulator of tests/object_stores.py) is installed from npm and runs on Node.js
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -gt 0 ]; then
  echo "system-deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # another apt/dpkg process (unattended upgrades, a parallel install) may hold the locks: wait for it
  lock=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)
  apt-get "${lock[@]}" update -qq
  apt-get "${lock[@]}" install -y -qq --no-install-recommends "${need[@]}"
fi
