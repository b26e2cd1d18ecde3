"""The queue family: Jepsen's queue checks of the send/poll workload's histories.

Parts: ``extract`` (sends, polls and their values from the history), ``analysis`` (the
per-value facts every rule reads), ``checks`` (the entry point), ``cycles`` and ``ordering``
(the two families of rules that need more than one value). The queue family runs in plain
Python only: its histories are one op per client request, small enough for one process.
"""
