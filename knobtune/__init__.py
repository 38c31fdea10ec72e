"""knobtune: find the configuration that makes a database fast for one workload on one machine."""

__version__ = "0.1.0"
