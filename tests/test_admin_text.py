"""The admin shows the IDs a model, a provider or a caller wrote as the console shows them: each
bidirectional control a visible marker, the whole isolated (``<bdi>``), in the list and on the
detail page, so ``call_`` + U+202E + ``evil`` never reads as ``call_live``."""

from __future__ import annotations

import re

import pytest
from django.db import models
from django.test import Client

from tests.factories import ModelTurnFactory, OperationFactory, ToolCallFactory
from tests.test_admin import change_url, superuser, url
from toolcalls.models import IdempotencyRecord, ModelTurn, Operation, ToolCall

pytestmark = pytest.mark.django_db
__all__ = ["superuser"]  # the fixture, used by name

OVERRIDE = "\u202e"
MARKER = '<span class="control" title="U+202E RIGHT-TO-LEFT OVERRIDE">⟨U+202E⟩</span>'


@pytest.fixture
def rows() -> dict[type[models.Model], models.Model]:
    """One row of each model, every ID holding a right-to-left override."""
    operation = OperationFactory.create(subject_ref=f"cus_{OVERRIDE}1")
    turn = ModelTurnFactory.create(operation=operation, response_id=f"resp_{OVERRIDE}1")
    call = ToolCallFactory.create(
        turn=turn,
        provider_call_id=f"call_{OVERRIDE}1",
        item_id=f"fc_{OVERRIDE}1",
        tool_name=f"get_{OVERRIDE}order",
        idempotency_key=f"order:{OVERRIDE}1",
    )
    record = IdempotencyRecord.objects.create(
        tenant=operation.tenant,
        tool_name="get_order",
        key=f"order:{OVERRIDE}1",
        request_sha256="0" * 64,
        call=call,
    )
    return {Operation: operation, ModelTurn: turn, ToolCall: call, IdempotencyRecord: record}


#: (model, field, shown in the list): every field the admin shows of what others wrote.
FIELDS = [
    (Operation, "subject_ref", False),
    (ModelTurn, "response_id", True),
    (ToolCall, "response_id", False),
    (ToolCall, "provider_call_id", True),
    (ToolCall, "item_id", False),
    (ToolCall, "tool_name", True),
    (ToolCall, "idempotency_key", False),
    (IdempotencyRecord, "key", True),
]


def _marked(raw: str) -> str:
    return f"<bdi>{raw.replace(OVERRIDE, MARKER)}</bdi>"


def _list_cells(page: str, field: str) -> list[str]:
    """The cells of ``field``'s column, without the link to the row (the first column's)."""
    pattern = (
        rf'<t[dh] class="field-{field}(?:_shown)?">(?:<a href="[^"]*">)?(.*?)(?:</a>)?</t[dh]>'
    )
    return re.findall(pattern, page, re.S)


def _detail_values(page: str, field: str) -> list[str]:
    pattern = rf'"form-row field-{field}(?:_shown)?".*?<div class="readonly">(.*?)</div>'
    return re.findall(pattern, page, re.S)


@pytest.mark.parametrize(("model", "field", "listed"), FIELDS)
def test_an_id_with_a_bidi_control_shows_the_control(
    superuser: Client, rows: dict, model: type[models.Model], field: str, listed: bool
) -> None:
    row = rows[model]
    raw = getattr(row, field)
    assert OVERRIDE in raw
    detail = superuser.get(change_url(row)).content.decode()
    assert _detail_values(detail, field) == [_marked(raw)]
    if listed:
        changelist = superuser.get(url(model, "changelist")).content.decode()
        assert _list_cells(changelist, field) == [_marked(raw)]


def test_a_blank_id_shows_as_empty(superuser: Client) -> None:
    turn = ModelTurnFactory.create(response_id="")
    changelist = superuser.get(url(ModelTurn, "changelist")).content.decode()
    assert _list_cells(changelist, "response_id") == ["-"]
    detail = superuser.get(change_url(turn)).content.decode()
    assert _detail_values(detail, "response_id") == ["-"]


@pytest.mark.parametrize("model", [ToolCall, IdempotencyRecord])
def test_a_row_named_by_what_others_wrote_is_titled_with_the_control_shown(
    superuser: Client, rows: dict, model: type[models.Model]
) -> None:
    detail = superuser.get(change_url(rows[model])).content.decode()
    title = re.search(r"<title>(.*?)</title>", detail, re.S)
    assert title and "⟨U+202E⟩" in title.group(1)
    assert OVERRIDE not in detail.replace(MARKER, "")  # not in the heading or breadcrumbs
