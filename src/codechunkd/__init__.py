"""codechunkd: a git-aware background indexer of syntax-aware code chunks."""

__version__ = "0.1.0"
__all__ = ["__version__"]
