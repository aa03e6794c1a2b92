"""A bounded memo for pure answers kept by an object's JSON (the receiver's per-dataset work)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Memo(Generic[V]):
    """Answers kept by key, up to ``max_entries`` and ``max_bytes`` of keys' JSON; it starts over
    when either is reached, so a producer of huge facets costs memory only up to the bound.
    Safe to share between threads: a lost update only costs a recomputation."""

    def __init__(self, max_entries: int = 8192, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._answers: dict[Hashable, V] = {}
        self._bytes = 0

    def get(self, key: Hashable) -> V | None:
        return self._answers.get(key)

    def put(self, key: Hashable, size: int, answer: V) -> V:
        """Keep ``answer`` for ``key`` (``size``: the bytes the key holds); returns ``answer``."""
        if size > self.max_bytes:
            return answer
        if len(self._answers) >= self.max_entries or self._bytes + size > self.max_bytes:
            self._answers.clear()
            self._bytes = 0
        self._answers[key] = answer
        self._bytes += size
        return answer

    def __len__(self) -> int:
        return len(self._answers)
