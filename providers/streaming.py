"""Shared pieces of streamed-reply assembly.

Fragments are correlated by the provider's identifiers inside each family's assembler; this
module bounds how much argument text one call may accumulate and drives an assembler over a
recorded event list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from providers.base import ParsedReply, StreamAssembler

#: What a call's raw arguments become when the stream exceeded the byte limit.
OVERFLOW_MARKER = "[arguments exceeded the stream byte limit]"


class ArgumentBuffer:
    """Argument text of one streamed call, bounded to ``max_bytes`` (UTF-8).

    Past the limit the buffer stops growing and ``overflowed`` is set: the call then carries an
    argument error instead of a half document.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._parts: list[str] = []
        self._size = 0
        self.overflowed = False

    def add(self, fragment: Any) -> None:
        if not isinstance(fragment, str) or self.overflowed:
            return
        self._size += len(fragment.encode("utf-8"))
        if self._size > self._max_bytes:
            self.overflowed = True
            self._parts.clear()
            return
        self._parts.append(fragment)

    def replace(self, full_text: Any) -> None:
        """Take the provider's authoritative full text (a done event), within the same limit."""
        if not isinstance(full_text, str):
            return
        self._parts.clear()
        self._size = 0
        self.overflowed = False
        self.add(full_text)

    @property
    def empty(self) -> bool:
        return not self._parts and not self.overflowed

    def text(self) -> str:
        return OVERFLOW_MARKER if self.overflowed else "".join(self._parts)


def assemble(assembler: StreamAssembler, events: Iterable[Any]) -> ParsedReply:
    """Feed every recorded event (non-mappings are skipped) and classify the result."""
    for event in events:
        if isinstance(event, Mapping):
            assembler.feed(event)
    return assembler.finish()
