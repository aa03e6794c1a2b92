"""Text as a terminal may show it: what a terminal would act on, written as its escape."""

from __future__ import annotations

import re

# what a terminal would act on rather than show: C0 controls (tab, CR and LF among them), DEL, C1
# controls (CSI and OSC start escape sequences), and the marks that reorder or hide text (bidi
# embeddings, overrides and isolates, the Arabic letter mark, line and paragraph separators)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(found: re.Match[str]) -> str:
    char = found.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def safe(text: object) -> str:
    """Text from the catalog (or an input file) as a terminal may show it: every character a
    terminal would act on is written as its escape (``\\x1b``, ``\\n``, ``\\u202e``), so that a
    name cannot set the window title, clear the screen, move the cursor or forge a row. Every
    text output goes through it, a field (or a line of fields) at a time."""
    return _UNSAFE.sub(_escaped, str(text))


# the same in JSON text that JSON leaves as they are (it escapes C0 controls itself): inside its
# strings, where alone they can be, each is written as the escape that reads back as it; and a
# lone surrogate (a byte of a name that is no UTF-8, a file's path, as Python reads it), which
# would be written as that byte: JSON text that is no UTF-8
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def json_safe(text: str) -> str:
    """JSON text as a terminal may show it, the same JSON: every character a terminal would act
    on that JSON leaves as it is (DEL, C1 controls, the marks that reorder text) written as its
    ``\\uXXXX`` escape."""
    if text.isascii() and "\x7f" not in text:  # the usual text, at C's speed
        return text
    return _UNSAFE_IN_JSON.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


__all__ = ["json_safe", "safe"]
