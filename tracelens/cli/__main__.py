"""``python -m tracelens.cli``: the same as the ``tracelens`` command."""

from tracelens.cli import main

main()
