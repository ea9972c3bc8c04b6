"""Classical collective algorithms as explicit, verifiable schedules on any machine model.

``algorithms`` writes each one as logical messages over the communicator, ``listsched`` maps
them onto the physical network (shortest-path routing, link contention, stages), ``rings`` and
``dims`` find the structure some of them need. Run them by name through
``optcoll.producers.registry``.
"""
