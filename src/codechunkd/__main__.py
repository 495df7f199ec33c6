"""``python -m codechunkd`` runs the CLI."""

from codechunkd.cli import main

if __name__ == "__main__":  # a spawned child (the MCP server's reader) imports this module
    main()
