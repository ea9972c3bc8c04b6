"""Schedules from outside optcoll's own producers: a user's ``py:`` function, a ``cmd:`` command,
a ``dir:`` of files, or a ``builtin:`` synthesizer named like one, run isolated and handed to the
shared verifier (the ``check`` gate and the sweeps' check jobs both run them through here)."""
