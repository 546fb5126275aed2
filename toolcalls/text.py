"""Whether text says anything a person can see: the rule for text that may not be blank; and
text others wrote as HTML that shows what it holds."""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import Any

from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

#: Characters that show nothing by themselves: white space (Zs, Zl, Zp, and the controls among
#: Cc such as tab and line feed), other controls, and format characters (Cf: zero-width space
#: U+200B, word joiner U+2060, byte-order mark U+FEFF, Mongolian vowel separator U+180E, bidi
#: marks), which ``str.strip`` keeps.
_INVISIBLE = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})
#: Code points outside those categories that show nothing either: the rest of Unicode's
#: Default_Ignorable_Code_Point (DerivedCoreProperties.txt: the combining grapheme joiner
#: U+034F, the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0, the Khmer inherent vowels,
#: variation selectors, and the code points reserved as ignorable) and the blank Braille
#: pattern U+2800.
_BLANK_RANGES = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180D), (0x180F, 0x180F),
    (0x2065, 0x2065), (0x2800, 0x2800), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8), (0xE0000, 0xE0FFF),
)  # fmt: skip
_BLANK = frozenset(code for first, last in _BLANK_RANGES for code in range(first, last + 1))


def _shows_nothing(char: str) -> bool:
    return unicodedata.category(char) in _INVISIBLE or ord(char) in _BLANK


def visible(text: str) -> bool:
    """Whether ``text`` holds a character other than white space, controls, format characters
    and the others that show nothing (:data:`_BLANK`). Text that may not be blank must (a
    denial's reason: a model told "Reason: " and a zero-width space, or a Hangul filler, was
    told nothing)."""
    return not all(_shows_nothing(char) for char in text)


def plain(text: str) -> bool:
    """Whether every character of ``text`` shows, plain spaces (U+0020) aside: no other white
    space, control, format character or other that shows nothing. A name shown on one line
    must be: with a zero-width space (U+200B) inside, ``billing`` would look like another
    ``billing``, and a tab or a line feed would break a listing's columns."""
    return all(char == " " or not _shows_nothing(char) for char in text)


@cache
def visible_pattern() -> str:
    """:func:`visible` as a regular expression that finds a visible character, for JSON
    Schema's ``pattern`` (ECMA 262 without flags, which cannot name a character beyond U+FFFF:
    the few format characters there, such as the tags U+E0020 to U+E007F, are not in it)."""
    ranges: list[list[int]] = []
    for code in range(0x10000):
        if _shows_nothing(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1][1] = code
            else:
                ranges.append([code, code])
    parts = (f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)
    return f"[^{''.join(parts)}]"


#: Unicode's bidirectional controls (marks, embeddings, overrides, isolates): invisible, yet
#: they reorder the text around them, so ``cus_\u202eevil`` reads as ``cus_live``.
_BIDI_CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def shown_plain(value: str) -> str:
    """``value`` as plain text for people where no markup goes (a row's name in the admin's
    titles and breadcrumbs): each bidirectional control written as ``⟨U+202E⟩``, so it can
    reorder nothing."""
    return _BIDI_CONTROLS.sub(lambda match: f"⟨U+{ord(match.group(0)):04X}⟩", value)


def _control_marker(match: re.Match[str]) -> str:
    code = f"U+{ord(match.group(0)):04X}"
    name = unicodedata.name(match.group(0))
    return f'<span class="control" title="{code} {name}">⟨{code}⟩</span>'


def shown_html(value: Any) -> SafeString:
    """Text from users, callers, models or tools as HTML for people (the console's ``visible``
    filter, the admin's IDs): escaped, each bidirectional control shown as a marker
    (``⟨U+202E⟩``, its name in the title) instead of reordering what is around it, and the
    whole isolated (``<bdi>``) so its direction never spills into the text beside it. For
    showing only: a form field keeps the exact value. ``None`` is shown as empty text."""
    escaped = conditional_escape("" if value is None else value)
    # Safe: the text is escaped before the markers (our own markup) go in.
    return mark_safe(f"<bdi>{_BIDI_CONTROLS.sub(_control_marker, escaped)}</bdi>")
