"""`envyard setup`: turning a Python repository into a verified environment. This package starts with evidence
extraction (`gather`), which reads a repository's files and never executes them."""

from .evidence import Evidence, Fact, NotARepository, gather

__all__ = ["Evidence", "Fact", "NotARepository", "gather"]
