"""``python -m cosimrun`` runs the ``cosimrun`` command."""

from cosimrun.cli import main

main()
