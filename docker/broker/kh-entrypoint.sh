#!/bin/sh
# Start one combined broker+controller from a harness-generated config, with the Kafka jars
# mounted at KH_KAFKA_LIBS (default /opt/kafka/libs; the Maven-resolved installation of
# harness.kafka.install, no release tarball and so no bin/ scripts: the classes are run).
#
# The config comes base64-encoded in KH_SERVER_PROPERTIES (what harness/substrate/docker/cluster.py
# passes), or from the file KH_CONFIG_FILE (what docker/compose.yaml mounts). Storage is
# formatted on the first start only (--ignore-formatted): a killed container restarts on the
# data its volume kept. The broker logs to stdout (docker logs).
set -eu

: "${KH_CLUSTER_ID:?set KH_CLUSTER_ID to a KRaft cluster id (22 base64url characters)}"
libs=${KH_KAFKA_LIBS:-/opt/kafka/libs}
java=${KH_JAVA:-java}
etc=${KH_ETC:-/etc/kafka-harness}
conf=${KH_CONF:-/var/lib/kafka/server.properties}
if [ -n "${KH_SERVER_PROPERTIES:-}" ]; then
    printf '%s' "$KH_SERVER_PROPERTIES" | base64 -d > "$conf"
elif [ -n "${KH_CONFIG_FILE:-}" ] && [ -f "$KH_CONFIG_FILE" ]; then
    cp "$KH_CONFIG_FILE" "$conf"
else
    echo "kh-entrypoint: set KH_SERVER_PROPERTIES or mount KH_CONFIG_FILE" >&2
    exit 2
fi
if ! ls "$libs"/kafka_2.13-*.jar >/dev/null 2>&1; then
    echo "kh-entrypoint: no Kafka jars in $libs (mount an installation's libs there)" >&2
    exit 2
fi

# Kafka 4.x logs through log4j2, 3.x through reload4j (log4j 1).
if ls "$libs"/log4j-core-*.jar >/dev/null 2>&1; then
    log_opt="-Dlog4j2.configurationFile=$etc/log4j2.properties"
    tool_log="-Dlog4j2.configurationFile=$etc/tools-log4j2.properties"
else
    log_opt="-Dlog4j.configuration=file:$etc/log4j.properties"
    tool_log="-Dlog4j.configuration=file:$etc/tools-log4j.properties"
fi

# KH_FORMAT_ARGS is a list of words on purpose (e.g. --feature transaction.version=2).
# shellcheck disable=SC2086
"$java" -XX:TieredStopAtLevel=1 -XX:+UseSerialGC "$tool_log" -cp "$libs/*" \
    kafka.tools.StorageTool format --ignore-formatted -t "$KH_CLUSTER_ID" -c "$conf" \
    ${KH_FORMAT_ARGS:-}
# shellcheck disable=SC2086
exec "$java" ${KAFKA_HEAP_OPTS:-} ${KAFKA_JVM_PERFORMANCE_OPTS:-} "$log_opt" -cp "$libs/*" \
    kafka.Kafka "$conf"
