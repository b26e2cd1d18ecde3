"""The ``offsets`` workload: consumer groups commit offsets and read each one back (the
commit register that judges KAFKA-20634)."""
