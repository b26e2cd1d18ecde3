#!/usr/bin/env bash
# Finding F9 aimed by hand (docs/findings.md#f9): a transaction coordinator that retries a
# marker while the partition has no leader skips it, as if the topic were deleted.
#
#   docs/repro/f9_aimed.sh [KAFKA_VERSION] [--remedy]   (default 4.4.0; root, process backend)
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
#
# --remedy, after SKIPPED: node 3 is started again (its own command line) and leads f9-0; a
# read_committed consumer of f9-0 reads nothing (the open transaction holds the last stable
# offset at 0); Kafka's own tool lists the transaction (kafka-transactions.sh find-hanging)
# and aborts it (abort --start-offset), and the same consumer then reads the 10 records
# written after it: what an operator does about a partition F9 left hanging.
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=${1:-4.4.0}
REMEDY=${2:-}
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
SLOT=$(echo "$N1" | cut -d. -f3)  # this cluster's namespaces: kh<slot>n<node>
for ns in "kh${SLOT}n1" "kh${SLOT}n2"; do
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
NS3="kh${SLOT}n3"
N3_PID=$(ip netns pids "$NS3" | head -1)
tr '\0' '\n' <"/proc/$N3_PID/cmdline" >"$WORK/node3.cmdline"
kill -9 "$N3_PID"
echo "$(date +%T) node 3 killed"
LIBS=$($PY -c 'from harness.kafka.install import ensure_installed; print(ensure_installed("'"$VERSION"'").classpath)')
tool() { java -cp "$LIBS" org.apache.kafka.tools.TransactionsCommand --bootstrap-server "$N1" "$@" 2>/dev/null; }
committed_reads() {  # records a read_committed consumer gets from f9-0 within 10 s
  $PY - <<PYEOF
import time
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": "$N1", "group.id": "f9-remedy", "isolation.level": "read_committed",
              "enable.auto.commit": False})
c.assign([TopicPartition("f9", 0, 0)])
n, end = 0, time.monotonic() + 10
while time.monotonic() < end:
    m = c.poll(0.5)
    n += m is not None and m.error() is None
print(n)
PYEOF
}
remedy() {
  mapfile -t CMD <"$WORK/node3.cmdline"
  ip netns exec "$NS3" "${CMD[@]}" >>"$STORE/nodes/n3/stdout.log" 2>&1 &
  disown
  for _ in $(seq 1 60); do [ "$(state)" = "3 [3]" ] && break; sleep 1; done
  echo "$(date +%T) node 3 back; f9-0 leader and ISR: $(state)"
  echo "$(date +%T) read_committed consumer of f9-0 reads $(committed_reads) record(s)"
  # find-hanging lists a transaction whose producer last wrote longer ago than its
  # --max-transaction-timeout (whole minutes, at least 1): wait for the minute to pass.
  for _ in $(seq 1 15); do
    tool find-hanging --broker-id 3 --max-transaction-timeout 1 | grep -q "^f9" && break; sleep 5
  done
  echo "$(date +%T) kafka-transactions.sh find-hanging --broker-id 3 --max-transaction-timeout 1:"
  tool find-hanging --broker-id 3 --max-transaction-timeout 1 | sed 's/^/    /'
  tool abort --topic f9 --partition 0 --start-offset 0 && echo "$(date +%T) aborted (abort --topic f9 --partition 0 --start-offset 0)"
  echo "$(date +%T) read_committed consumer of f9-0 reads $(committed_reads) record(s)"
  echo "$(date +%T) find-hanging now lists $(tool find-hanging --broker-id 3 --max-transaction-timeout 1 | grep -c "^f9") transaction(s) on f9"
  kill -9 "$(ip netns pids "$NS3" | head -1)" 2>/dev/null || true
}
for _ in $(seq 1 40); do
  if grep -q "Couldn't find leader endpoint for partitions Set(f9-0)" "$LOG1"; then
    echo "$(date +%T) f9-0 leader and ISR: $(state)"
    grep -h "Couldn't find leader endpoint" "$LOG1" | head -1
    echo "SKIPPED: the coordinator completes $TXID without f9-0's marker (F9)"
    [ "$REMEDY" = "--remedy" ] && remedy
    exit 1
  fi
  sleep 1
done
echo "$(date +%T) f9-0 leader and ISR: $(state)"
echo "NOT SKIPPED: no skip within 40 s of the kill; the markers wait for a leader"
