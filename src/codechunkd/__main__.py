"""``python -m codechunkd`` runs the CLI."""

from codechunkd.cli import main

main()
