"""Whether text says anything a person can see: the rule for text that may not be blank."""

from __future__ import annotations

import unicodedata
from functools import cache

#: Characters that show nothing by themselves: white space (Zs, Zl, Zp, and the controls among
#: Cc such as tab and line feed), other controls, and format characters (Cf: zero-width space
#: U+200B, word joiner U+2060, byte-order mark U+FEFF, Mongolian vowel separator U+180E, bidi
#: marks), which ``str.strip`` keeps.
_INVISIBLE = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})


def visible(text: str) -> bool:
    """Whether ``text`` holds a character other than white space, controls and format
    characters. Text that may not be blank must (a denial's reason: a model told "Reason: "
    and a zero-width space was told nothing)."""
    return any(unicodedata.category(char) not in _INVISIBLE for char in text)


def plain(text: str) -> bool:
    """Whether every character of ``text`` shows, plain spaces (U+0020) aside: no other white
    space, control or format character. A name shown on one line must be: with a zero-width
    space (U+200B) inside, ``billing`` would look like another ``billing``, and a tab or a line
    feed would break a listing's columns."""
    return all(char == " " or unicodedata.category(char) not in _INVISIBLE for char in text)


@cache
def visible_pattern() -> str:
    """:func:`visible` as a regular expression that finds a visible character, for JSON
    Schema's ``pattern`` (ECMA 262 without flags, which cannot name a character beyond U+FFFF:
    the few format characters there, such as the tags U+E0020 to U+E007F, are not in it)."""
    ranges: list[list[int]] = []
    for code in range(0x10000):
        if unicodedata.category(chr(code)) in _INVISIBLE:
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    parts = (f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)
    return f"[^{''.join(parts)}]"
