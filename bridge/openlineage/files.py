"""``bridge.openlineage.files``, where the reader of event files was: it is
:func:`bridge.files.read_json_items`, and a part of a file that is not JSON comes as an
:class:`~bridge.errors.InputFileError` (``BadInput`` here, with its ``message``). Kept for the
code that imports it."""

from __future__ import annotations

from bridge.errors import InputFileError as BadInput
from bridge.files import read_json_items as read_events

__all__ = ["BadInput", "read_events"]
