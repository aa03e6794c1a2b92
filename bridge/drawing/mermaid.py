"""What every Mermaid diagram of this package needs: node ids and label text that Mermaid 11's
parser reads as meant (checked against it in tests/test_render.py).

Node ids: "n_" + the id with every character other than an ASCII letter or digit written as
"_<hex code point>_" ("a.b" -> n_a_2e_b, "a_b" -> n_a_5f_b), so distinct ids never share a node,
the same id always gets the same node, and a node id holds only [A-Za-z0-9_], which no Mermaid
keyword or arrow can be read into.

Labels are quoted strings. Inside them Mermaid ends the string at '"', reads "#...;" as an entity
code and its rendering reads the text as HTML, so '"', '#', '&', '<', '>', '%' (against
"%%{...}%%" directives), '`' (against markdown strings) and control characters are written as
numeric entity codes ("#34;"); everything else, Unicode included, stays as it is.
"""

from __future__ import annotations

import unicodedata

_ESCAPED = frozenset('"#&<>%`')


def node_id(name: str) -> str:
    """The Mermaid node id of an asset id (or of any other name)."""
    return "n_" + "".join(c if c.isascii() and c.isalnum() else f"_{ord(c):x}_" for c in name)


def label_text(text: str) -> str:
    """``text`` as it can stand inside a quoted Mermaid label."""
    return "".join(
        f"#{ord(c)};" if c in _ESCAPED or (unicodedata.category(c)[0] in "CZ" and c != " ") else c for c in text
    )
