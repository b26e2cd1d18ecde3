#!/bin/sh
# Start one combined broker+controller from a harness-generated config.
#
# The config comes base64-encoded in KH_SERVER_PROPERTIES (what harness/substrate/docker/cluster.py
# passes: no bind mount, so it works whatever file system the engine sees), or from the file
# KH_CONFIG_FILE (what docker/compose.yaml mounts). Storage is formatted on the first start
# only (--ignore-formatted): a killed container restarts on the data its volume kept.
set -eu

: "${KH_CLUSTER_ID:?set KH_CLUSTER_ID to a KRaft cluster id (22 base64url characters)}"
kafka_home=${KAFKA_HOME:-/opt/kafka}
conf=${KH_CONF:-/var/lib/kafka/server.properties}
if [ -n "${KH_SERVER_PROPERTIES:-}" ]; then
    printf '%s' "$KH_SERVER_PROPERTIES" | base64 -d > "$conf"
elif [ -n "${KH_CONFIG_FILE:-}" ] && [ -f "$KH_CONFIG_FILE" ]; then
    cp "$KH_CONFIG_FILE" "$conf"
else
    echo "kh-entrypoint: set KH_SERVER_PROPERTIES or mount KH_CONFIG_FILE" >&2
    exit 2
fi

# KH_FORMAT_ARGS is a list of words on purpose (e.g. --feature transaction.version=2).
# shellcheck disable=SC2086
"$kafka_home/bin/kafka-storage.sh" format --ignore-formatted -t "$KH_CLUSTER_ID" -c "$conf" \
    ${KH_FORMAT_ARGS:-}
exec "$kafka_home/bin/kafka-server-start.sh" "$conf"
