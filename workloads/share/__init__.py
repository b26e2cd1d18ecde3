"""The ``share`` workload: members of one Kafka share group (KIP-932) under faults."""
