"""One round of delivery: events of different runs, split into requests sent side by side."""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from bridge.delivery.retry import RateLimiter
from bridge.delivery.senders import Outcome, Sender


class Dispatcher:
    """Sends rounds of events with at most ``concurrency`` requests in flight, up to
    ``batch_size`` events a request. The events of one round belong to different runs (the
    callers see to that), so their order within the round does not matter."""

    def __init__(
        self, sender: Sender, *, concurrency: int = 4, batch_size: int = 200, limiter: RateLimiter | None = None
    ) -> None:
        self.sender = sender
        self.concurrency = max(1, min(concurrency, sender.max_concurrency))
        self.batch_size = max(1, batch_size)
        self.limiter = limiter
        self._pool = (
            ThreadPoolExecutor(self.concurrency, thread_name_prefix="olbridge-send") if self.concurrency > 1 else None
        )

    def send(self, lines: Sequence[str]) -> list[Outcome]:
        if not lines:
            return []
        size = min(self.batch_size, math.ceil(len(lines) / self.concurrency))
        chunks = [lines[i : i + size] for i in range(0, len(lines), size)]
        if self._pool is None or len(chunks) == 1:
            results = [self._one(chunk) for chunk in chunks]
        else:
            results = list(self._pool.map(self._one, chunks))
        return [outcome for chunk in results for outcome in chunk]

    def _one(self, chunk: Sequence[str]) -> list[Outcome]:
        if self.limiter is not None:
            self.limiter.acquire(len(chunk))
        return self.sender.send(chunk)

    def close(self) -> None:
        """Wait for requests in flight, then let the sender go."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.sender.close()
