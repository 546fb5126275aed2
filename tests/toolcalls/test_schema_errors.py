"""A JSON Schema error is placed the same way in every message that carries one: the model's
error envelope, a scenario file's refusal and the API's 400 for replay replies."""

from __future__ import annotations

from pathlib import Path

import pytest
from rest_framework import serializers

from tests.factories import OperationFactory
from toolcalls.api.serializers import replies_check
from toolcalls.demo.scenario import ScenarioError, scenario_read
from toolcalls.services.validation import arguments_normalize, call_check


@pytest.mark.django_db
def test_the_arguments_root_is_named_as_the_other_messages_name_it() -> None:
    operation = OperationFactory.create()
    arguments = arguments_normalize(arguments={}, arguments_error=False, raw_arguments=None)
    verdict = call_check(operation=operation, tool_name="get_order", arguments=arguments)
    assert "(root): 'order_id' is a required property" in verdict.error_message


def test_a_scenario_file_that_is_not_an_object_is_refused_at_the_root(tmp_path: Path) -> None:
    path = tmp_path / "scenario.json"
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"scenario\.json: \(root\): \[\] is not of type"):
        scenario_read(path)


def test_replies_that_are_not_a_list_are_refused_at_the_root_and_a_reply_at_its_place() -> None:
    with pytest.raises(serializers.ValidationError, match=r"\(root\): \{\} is not of type"):
        replies_check({})  # type: ignore[arg-type]
    with pytest.raises(serializers.ValidationError, match=r"0: 'kind' is a required property"):
        replies_check([{}])
