"""The Examples section that ends the ``--help`` of the main commands (a click epilog)."""

from __future__ import annotations


def examples(*lines: str) -> str:
    """An epilog of example command lines, one a line and kept as written (click's ``\\b``); a
    line may end with ``  # what it does``."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
