"""The bounded memo behind the receiver's per-dataset work."""

from __future__ import annotations

from bridge.memo import Memo


def test_answers_are_kept_by_key() -> None:
    memo: Memo[str] = Memo()
    assert memo.get("a") is None
    assert memo.put("a", 10, "answer") == "answer"
    assert memo.get("a") == "answer"


def test_it_starts_over_at_its_entry_bound() -> None:
    memo: Memo[int] = Memo(max_entries=3)
    for n in range(3):
        memo.put(n, 1, n)
    assert len(memo) == 3
    memo.put(3, 1, 3)
    assert len(memo) == 1 and memo.get(0) is None and memo.get(3) == 3


def test_it_starts_over_at_its_byte_bound_and_never_keeps_what_exceeds_it() -> None:
    memo: Memo[int] = Memo(max_bytes=100)
    memo.put("small", 60, 1)
    memo.put("more", 60, 2)  # 120 bytes would pass the bound: the first goes
    assert memo.get("small") is None and memo.get("more") == 2
    assert memo.put("huge", 101, 3) == 3  # answered, not kept
    assert memo.get("huge") is None and memo.get("more") == 2
