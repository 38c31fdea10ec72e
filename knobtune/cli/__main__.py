"""``python -m knobtune.cli``: the same as the ``knobtune`` command."""

from knobtune.cli import main

main()
