#!/usr/bin/env bash
# Finding F9 aimed by hand (docs/findings.md#f9): a transaction coordinator that retries a
# marker while the partition has no leader skips it, as if the topic were deleted.
#
#   docs/repro/f9_aimed.sh [KAFKA_VERSION]     (default 4.4.0; root, the process backend)
#
# On a fresh 3-node cluster (python -m harness cluster): a topic f9-0 led by node 3 with
# min.insync.replicas=1, and a transactional id whose coordinator is node 1. A producer writes
# 5 records in a transaction and never ends it. Nodes 1 and 2 are cut from node 3's
# inter-broker port (iptables in their namespaces): their fetches and the coordinator's
# markers fail. Writes with acks=1 go on at node 3, so its followers fall behind and the ISR
# shrinks to {3} while the high watermark moves on (no eligible leader replica is left). When
# the coordinator rolls the transaction back on its timeout, node 3 is killed; once the
# controller fences it, f9-0 has no leader, and the coordinator's next retry looks the leader
# up. Prints SKIPPED (the coordinator logged that it skips the partition) or NOT SKIPPED
# (nothing within 40 s of the kill); exit status 1 and 0. The cluster is torn down at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=${1:-4.4.0}
PY=.venv/bin/python
WORK=$(mktemp -d /tmp/f9-aimed-XXXXXX)
STORE=$WORK/cluster
cluster_pid=""
cleanup() {
  pkill -f "$WORK/producer.py" 2>/dev/null || true
  if [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null; then
    kill -INT "$cluster_pid"
    for _ in $(seq 1 60); do kill -0 "$cluster_pid" 2>/dev/null || break; sleep 0.5; done
  fi
  $PY -m harness reap >/dev/null 2>&1 || true
}
trap cleanup EXIT

$PY -m harness cluster --kafka-version "$VERSION" --hold 300 --store "$STORE" \
  --broker-config replica.lag.time.max.ms=4000 >"$WORK/cluster.json" 2>"$WORK/cluster.err" &
cluster_pid=$!
for _ in $(seq 1 120); do grep -q ready_seconds "$WORK/cluster.json" && break; sleep 0.5; done
grep -q ready_seconds "$WORK/cluster.json" || { cat "$WORK/cluster.err" >&2; exit 2; }
NS=$($PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["internal_bootstrap"])' "$WORK/cluster.json")
N1=${NS%%,*}; N3=${NS##*,}; N3_HOST=${N3%:*}; N3_PORT=${N3#*:}

cat >"$WORK/setup.py" <<PYEOF
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": "$N1"})
for f in a.create_topics(
    [NewTopic("f9", 1, -1, replica_assignment=[[3, 1, 2]], config={"min.insync.replicas": "1"})]
).values():
    f.result()
def java_hash(s):
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h
parts = a.list_topics("__transaction_state", timeout=10).topics["__transaction_state"].partitions
for i in range(10000):  # a transactional id whose coordinator is node 1
    t = f"f9-tx-{i}"
    if parts[(java_hash(t) & 0x7FFFFFFF) % len(parts)].leader == 1:
        print(t)
        break
PYEOF
TXID=$($PY "$WORK/setup.py")
cat >"$WORK/producer.py" <<PYEOF
import time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": "$N1", "transactional.id": "$TXID",
              "transaction.timeout.ms": 10000})
p.init_transactions(30)
p.begin_transaction()
for i in range(5):
    p.produce("f9", value=b"v%d" % i, partition=0)
p.flush(30)
print("written", flush=True)
time.sleep(600)  # never ends the transaction: the coordinator rolls it back on its timeout
PYEOF
$PY "$WORK/producer.py" >"$WORK/producer.out" 2>&1 &
for _ in $(seq 1 60); do grep -q written "$WORK/producer.out" && break; sleep 0.5; done
echo "$(date +%T) Kafka $VERSION: $TXID wrote 5 records to f9-0 (leader node 3), coordinator node 1"

run_ns() { ip netns exec "$1" "${@:2}"; }
NSNAMES=$(ip netns list | awk '{print $1}' | sort)
for ns in $(echo "$NSNAMES" | grep -E 'n1$|n2$'); do
  run_ns "$ns" iptables -A OUTPUT -d "$N3_HOST" -p tcp --dport "$N3_PORT" -j REJECT --reject-with tcp-reset
done
$PY - <<PYEOF
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": "$N3", "acks": 1, "enable.idempotence": False})
for _ in range(10):
    p.produce("f9", value=b"x", partition=0)
p.flush(10)
PYEOF
state() {
  $PY -c "
from confluent_kafka.admin import AdminClient
p = AdminClient({'bootstrap.servers': '$N1'}).list_topics('f9', timeout=10).topics['f9'].partitions[0]
print(p.leader, p.isrs)"
}
for _ in $(seq 1 30); do s=$(state); [ "$s" = "3 [3]" ] && break; sleep 1; done
echo "$(date +%T) f9-0 leader and ISR: $s"
LOG1=$STORE/nodes/n1/server.log
for _ in $(seq 1 60); do grep -q "rollback.*$TXID.*timeout" "$LOG1" && break; sleep 1; done
echo "$(date +%T) the coordinator rolls $TXID back (its markers cannot reach node 3)"
kill -9 "$(ip netns pids "$(echo "$NSNAMES" | grep -E 'n3$')" | head -1)"
echo "$(date +%T) node 3 killed"
for _ in $(seq 1 40); do
  if grep -q "Couldn't find leader endpoint for partitions Set(f9-0)" "$LOG1"; then
    echo "$(date +%T) f9-0 leader and ISR: $(state)"
    grep -h "Couldn't find leader endpoint" "$LOG1" | head -1
    echo "SKIPPED: the coordinator completes $TXID without f9-0's marker (F9)"
    exit 1
  fi
  sleep 1
done
echo "$(date +%T) f9-0 leader and ISR: $(state)"
echo "NOT SKIPPED: no skip within 40 s of the kill; the markers wait for a leader"
