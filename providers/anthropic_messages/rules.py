"""The Messages API's own request rules, for the replay transport only.

The rules are in "Handle tool calls"
(https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls: tool_result
blocks immediately after their tool_use blocks, and first in the user message) and "Extended
thinking" (https://platform.claude.com/docs/en/build-with-claude/extended-thinking: thinking
blocks go back unchanged); the envelope in "Errors" (https://platform.claude.com/docs/en/api/errors);
the texts from public error reports.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from providers.anthropic_messages.reply import THINKING
from providers.base import ParsedReply, WireReply
from providers.payload import EMPTY, items, obj, text

# The API's own 400 texts (public error reports). ``n`` is the message index in ``messages``,
# ``m`` the block index in that message's ``content``.
MISSING_RESULT = (
    "messages.{n}: `tool_use` ids were found without `tool_result` blocks immediately after: "
    "{ids}. Each `tool_use` block must have a corresponding `tool_result` block in the next "
    "message."
)
UNEXPECTED_RESULT = (
    "messages.{n}.content.{m}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. "
    "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
)
DUPLICATE_RESULT = (
    "messages.{n}.content.{m}: each tool_use must have a single result. Found multiple "
    "`tool_result` blocks with id: {id}"
)
RESULTS_NOT_FIRST = (
    "messages.{n}: Did not find {count} `tool_result` block(s) at the beginning of this message. "
    "Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
    "blocks."
)
THINKING_NOT_FIRST = (
    "messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). To "
    "avoid this requirement, disable `thinking`."
)
THINKING_MODIFIED = (
    "messages.{n}.content.{m}: `thinking` or `redacted_thinking` blocks in the latest assistant "
    "message cannot be modified. These blocks must remain as they were in the original response."
)


def request_error(*, request: Mapping[str, Any], previous: ParsedReply) -> WireReply | None:
    """The API's 400 when ``messages`` breaks the tool_use / tool_result pairing, leaves a call
    of ``previous`` out, or changes the thinking blocks that came before its calls; ``None``
    when it is acceptable."""
    messages = _messages(request)
    message = (
        _pairing_problem(messages)
        or _unreplayed_calls(messages, previous)
        or _thinking_problem(messages, previous)
    )
    return None if message is None else _invalid_request(message, request)


def _messages(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The request's messages, positions kept (a non-object entry reads as ``{}``)."""
    raw = request.get("messages")
    if isinstance(raw, Sequence) and not isinstance(raw, str | bytes):
        return [obj(message) for message in raw]
    return []


def _blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """A message's content blocks, positions kept; string content has none."""
    content = message.get("content")
    if isinstance(content, Sequence) and not isinstance(content, str | bytes):
        return [obj(block) for block in content]
    return []


def _tool_use_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") != "assistant":
        return []
    return [str(block.get("id")) for block in _blocks(message) if block.get("type") == "tool_use"]


def _pairing_problem(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The API's own check over the whole list: the message after an assistant message with
    tool_use blocks is a user message starting with exactly one tool_result per tool_use id,
    and a tool_result answers only a tool_use of the message right before it."""
    for position, message in enumerate(messages):
        asked = _tool_use_ids(message)
        following = messages[position + 1] if position + 1 < len(messages) else EMPTY
        if asked and following.get("role") != "user":
            return MISSING_RESULT.format(n=position, ids=", ".join(asked))
        if message.get("role") == "user":
            expected = _tool_use_ids(messages[position - 1]) if position else []
            problem = _results_problem(position, _blocks(message), expected)
            if problem:
                return problem
    return None


def _results_problem(
    position: int, blocks: Sequence[Mapping[str, Any]], asked: list[str]
) -> str | None:
    answered: list[str] = []
    leading = True
    misplaced = False
    for index, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            leading = False
            continue
        call_id = str(block.get("tool_use_id"))
        if call_id not in asked:
            return UNEXPECTED_RESULT.format(n=position, m=index, id=call_id)
        if call_id in answered:
            return DUPLICATE_RESULT.format(n=position, m=index, id=call_id)
        answered.append(call_id)
        misplaced = misplaced or not leading
    if misplaced:
        return RESULTS_NOT_FIRST.format(n=position, count=len(asked))
    missing = [call_id for call_id in asked if call_id not in answered]
    if missing:
        return MISSING_RESULT.format(n=position - 1, ids=", ".join(missing))
    return None


def _unreplayed_calls(messages: Sequence[Mapping[str, Any]], previous: ParsedReply) -> str | None:
    """The previous reply's tool_use blocks must be in the request at all. The API itself cannot
    notice a turn that was left out, so its missing-result text is used, placed at the end."""
    present = {call_id for message in messages for call_id in _tool_use_ids(message)}
    missing = [call.call_id for call in previous.calls if call.call_id not in present]
    if not missing:
        return None
    return MISSING_RESULT.format(n=max(len(messages) - 1, 0), ids=", ".join(missing))


def _thinking_problem(messages: Sequence[Mapping[str, Any]], previous: ParsedReply) -> str | None:
    """With thinking on, the assistant message holding the calls must start with a thinking
    block, and its thinking blocks must be the previous reply's, unchanged."""
    produced = items(list(previous.assistant_items))
    if not previous.calls or not _thinks_before_calling(produced):
        return None
    call_id = previous.calls[0].call_id
    position = next((i for i, m in enumerate(messages) if call_id in _tool_use_ids(m)), None)
    if position is None:
        return None  # already answered as an unreplayed call
    blocks = _blocks(messages[position])
    found = text(blocks[0].get("type")) if blocks else None
    if found not in THINKING:
        return THINKING_NOT_FIRST.format(n=position, found=found)
    originals = [block for block in produced if block.get("type") in THINKING]
    return _modified_thinking(position, blocks, originals)


def _thinks_before_calling(produced: Sequence[Mapping[str, Any]]) -> bool:
    for block in produced:
        if block.get("type") == "tool_use":
            return False
        if block.get("type") in THINKING:
            return True
    return False


def _modified_thinking(
    position: int, blocks: Sequence[Mapping[str, Any]], originals: Sequence[Mapping[str, Any]]
) -> str | None:
    """The first replayed thinking block that differs from (or is missing next to) the
    previous reply's; ``blocks`` starts with a thinking block."""
    replayed = [(i, block) for i, block in enumerate(blocks) if block.get("type") in THINKING]
    for (index, block), original in zip(replayed, originals, strict=False):
        if dict(block) != dict(original):
            return THINKING_MODIFIED.format(n=position, m=index)
    if len(replayed) > len(originals):
        return THINKING_MODIFIED.format(n=position, m=replayed[len(originals)][0])
    if len(replayed) < len(originals):
        return THINKING_MODIFIED.format(n=position, m=replayed[-1][0] + 1)
    return None


def _invalid_request(message: str, request: Mapping[str, Any]) -> WireReply:
    """The 400 envelope the Messages API sends ("Errors"); the request id is derived
    from the request so replaying it gives the same reply."""
    request_id = _request_id(request)
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
        "request_id": request_id,
    }
    return WireReply(
        kind="http_error", http_status=400, headers={"request-id": request_id}, body=body
    )


_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _request_id(request: Mapping[str, Any]) -> str:
    """``req_011C…`` (24 characters after ``req_``, like the API's) from a digest of the body."""
    try:
        encoded = json.dumps(request, sort_keys=True, default=str)
    except (TypeError, ValueError):
        encoded = repr(request)
    number = int.from_bytes(hashlib.sha256(encoded.encode("utf-8")).digest(), "big")
    digits = []
    for _ in range(20):
        number, digit = divmod(number, len(_BASE58))
        digits.append(_BASE58[digit])
    return "req_011C" + "".join(digits)
