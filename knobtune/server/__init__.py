"""A server's life, shared by every server knobtune runs (``systems/postgresql``, ``systems/cassandra``, the
systems ``described`` by a file): ``life`` (open, restore, start, wait, run, settle, stop), ``hooks`` (what each
server says of itself to that life: its argv, readiness, load, benchmark, settle and checks), ``process`` (argv only,
its own process group, killed with knobtune), ``memory`` (the peak a run used, against a ceiling), ``loaded`` (a
loaded copy of a server's data kept between studies).

Nothing here knows a system by name or an optimizer.
"""
