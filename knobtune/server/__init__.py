"""A server's life, shared by every server knobtune runs (``systems/postgresql``, ``systems/cassandra``, the
systems ``described`` by a file): ``life`` (``ServerTarget``: open, restore, start, wait, run, settle, stop, and the
hooks through which each server says what is its own: what runs it, and what the workload's driver does on it),
``process`` (argv only, its own process group, killed with knobtune), ``memory`` (the peak a run used, against a
ceiling), ``loaded`` (a loaded copy of a server's data kept between studies).

Nothing here knows a system by name or an optimizer.
"""
