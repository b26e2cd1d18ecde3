"""Fault kinds by family: each one is an injection and its exact inverse, both verified.

A fault's ``start`` returns the details of what it did (targets, why, and whatever ``stop``
needs to undo exactly that); ``stop`` undoes it. Neither assumes: a cut is probed, a pause is
read back from the kernel, a killed node is seen gone and its restart seen registered.
Parameters come from the schedule (seeded), so the same schedule means the same faults.

Families: ``network`` (partitions, client-path cuts and slow links), ``brokers`` (broker
processes), ``clients`` (client processes), ``moments`` (protocol moments), ``late`` (late
requests); ``base`` is what they share. ``moments`` composes the others (a coordinator
paused, isolated or cut at a moment is a broker or network fault, aimed).
:mod:`nemeses.kinds` registers them.
"""
