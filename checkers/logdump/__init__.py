"""The broker log dump as evidence, shared by the families that judge with it.

``evidence`` prepares a loaded dump for Spark (partitioned, its reference replicas chosen, the
per-producer state machine as columns) and places each record among its producer's
transactions; ``pyref`` does the same in plain Python; ``rules`` is what both share. The logs
family's checks are built on these, and the eos and connect families join their histories
with the positions.
"""
