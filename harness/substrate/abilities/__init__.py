"""What a cluster can do, one ability per module, as the backends share them.

Each module is a mixin of :class:`harness.substrate.base.ClusterBase` holding one ability of
``nemeses.control`` (look-ups, signals, network cuts, toxics, client cuts) or of
``workloads.base.ClusterAccess`` (Kafka's tools and topics); a backend inherits them all and
supplies only the hooks an ability leaves to it (how links are cut and healed, how a node
comes back). ``nodes`` is what they all stand on: the nodes and how to ask one directly.
"""
