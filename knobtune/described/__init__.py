"""Systems described as data: ``system_file`` (a system file read and checked), ``target`` (the one server target
that runs any of them through the shared server life) and ``command`` (a benchmark run as argv from a workload's
driver section). docs/system-file.md is the reference;
a shipped one is a folder of ``knobtune/systems/`` with a ``system.toml``.
"""
