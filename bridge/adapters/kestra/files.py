"""Reading a set of Kestra files all or nothing: every file is checked first, and with any bad one
a single ValidationError names each problem (its file, and its line when there is one)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

import attrs

from bridge.errors import ValidationError

T = TypeVar("T")


@attrs.frozen
class FileResult(Generic[T]):
    """What one file holds, or its problems; ``hint`` says what may be wrong with a bad file."""

    items: Sequence[T] = ()
    problems: Sequence[str] = ()
    hint: str = ""


def read_text(path: Path) -> str:
    """The file's UTF-8 text; a file that cannot be read raises a ValidationError naming it (rule
    ``kestra.text`` when it is not UTF-8 text)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValidationError(f"{path}: not UTF-8 text", rule="kestra.text") from None
    except OSError as exc:
        raise ValidationError(f"{path}: cannot read it: {exc.strerror or exc}", rule="kestra.file") from None


def read_files(paths: Sequence[Path], read: Callable[[Path], FileResult[T]], *, kind: str, rule: str) -> list[T]:
    """The items ``read`` finds in every file. All are checked first: with any problem (a
    ValidationError ``read`` raises is one) this raises one ValidationError,
    ``N bad <kind> file(s); nothing was recorded:`` and each problem on its own line, then each
    bad file's hint once."""
    items: list[T] = []
    problems: list[str] = []
    hints: list[str] = []
    bad = 0
    for path in paths:
        try:
            result = read(path)
        except ValidationError as exc:
            result = FileResult(problems=(str(exc),))
        if not result.problems:
            items += result.items
            continue
        bad += 1
        problems += result.problems
        if result.hint and result.hint not in hints:
            hints.append(result.hint)
    if problems:
        raise ValidationError(
            f"{bad} bad {kind} file(s); nothing was recorded:\n  "
            + "\n  ".join(problems)
            + "".join(f"\n({hint}.)" for hint in hints),
            rule=rule,
        )
    return items


__all__ = ["FileResult", "read_files", "read_text"]
