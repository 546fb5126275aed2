"""The OpenAPI document is exact: valid OpenAPI 3, and the API's own rules hold for every
operation (toolcalls.api.contract), so an endpoint added later is held to them too."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import resolve
from openapi_spec_validator import validate
from rest_framework.test import APIClient

from providers.base import ModelSettings, UnsupportedSetting
from providers.families import ADAPTERS
from tests.api.support import (
    READ,
    WRITE,
    create_body,
    error_of,
    fields_of,
    keyed_client,
    post,
)
from toolcalls.api import views
from toolcalls.api.contract import contract_problems
from toolcalls.api.schema import operations_of
from toolcalls.demo.services import DemoSeed


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    schema: dict[str, Any] = response.json()
    return schema


def test_the_served_document_is_valid_openapi_3_and_keeps_the_rules(
    document: dict[str, Any],
) -> None:
    validate(document)
    assert contract_problems(document) == []


def test_the_lint_command_passes(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("lint_api_schema")
    assert capsys.readouterr().out.startswith("OK: ")


def test_every_always_present_response_field_is_required(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for name in ("Operation", "Approval", "Turn", "Event", "Tool", "ErrorBody"):
        assert set(schemas[name]["required"]) == set(schemas[name]["properties"]), name
    # Only keys with audit:read see a call's protected audit.
    assert set(schemas["Call"]["properties"]) - set(schemas["Call"]["required"]) == {
        "protected_audit"
    }
    assert schemas["Operation"]["properties"]["state"] == {
        "$ref": "#/components/schemas/OperationStateEnum"
    }


def test_bounds_are_the_ones_enforced(document: dict[str, Any]) -> None:
    def parameter(path: str, method: str, name: str) -> dict[str, Any]:
        (found,) = [p for p in document["paths"][path][method]["parameters"] if p["name"] == name]
        return dict(found["schema"])

    assert parameter("/api/v1/operations", "get", "limit") | {"default": 0} == {
        "type": "integer",
        "minimum": 1,
        "maximum": 200,
        "default": 0,
    }
    assert parameter("/api/v1/operations/{public_id}/events", "get", "limit")["maximum"] == 500
    key = parameter("/api/v1/operations", "post", "Idempotency-Key")
    assert (key["minLength"], key["maxLength"]) == (1, 255)
    refused = ["k1,k2", "a\x01b", "a\tb", " a", "a\x7fb"]  # two headers joined, controls
    assert [k for k in refused if re.search(key["pattern"], k)] == []
    assert all(re.search(key["pattern"], k) for k in ("order 42", "dé-1", "a"))
    schemas = document["components"]["schemas"]
    assert schemas["OperationCreateRequest"]["properties"]["tools"]["uniqueItems"] is True
    assert schemas["ReviewRequest"]["properties"]["key_arguments"]["uniqueItems"] is True
    assert schemas["ReviewRequest"]["properties"]["timeout_ms"]["maximum"] == 120_000
    # Inside a body too, no other properties: a message of ``messages``, ``settings``.
    for nested in ("MessageRequest", "SettingsRequest"):
        assert schemas[nested]["additionalProperties"] is False, nested


def test_settings_state_the_widest_bounds_the_families_enforce(document: dict[str, Any]) -> None:
    """Each bound the document gives a setting is the widest any family takes: the bound passes
    some family's check, a value beyond it passes none; the enum of reasoning efforts is every
    value some family takes; a family that refuses a setting is named in its description."""
    settings = document["components"]["schemas"]["SettingsRequest"]["properties"]
    for name in ("max_output_tokens", "temperature", "top_p", "thinking_budget_tokens"):
        bounds = {k: settings[name][k] for k in ("minimum", "maximum") if k in settings[name]}
        step = 1 if settings[name]["type"] == "integer" else 0.001
        assert bounds, name
        for keyword, bound in bounds.items():
            beyond = bound - step if keyword == "minimum" else bound + step
            assert _honoured_by(name, bound), (name, bound)
            assert _honoured_by(name, beyond) == [], (name, beyond)
    efforts = document["components"]["schemas"]["ReasoningEffortEnum"]["enum"]
    assert all(_honoured_by("reasoning_effort", effort) for effort in efforts)
    assert _honoured_by("reasoning_effort", "extreme") == []
    assert "openai_responses: at least 16" in settings["max_output_tokens"]["description"]
    assert "anthropic_messages: at least 1024" in settings["thinking_budget_tokens"]["description"]
    usual = {
        "max_output_tokens": 1024,
        "temperature": 1.0,
        "top_p": 0.5,
        "thinking_budget_tokens": 2048,
        "reasoning_effort": "low",
        "tool_choice": "auto",
        "parallel_tool_calls": True,
    }
    for name, value in usual.items():
        description = settings[name]["description"]
        for family in set(ADAPTERS) - set(_honoured_by(name, value)):
            assert re.search(rf"Refused by .*{family} \(", description), (name, family)


def _honoured_by(name: str, value: Any) -> list[str]:
    """The families whose check takes setting ``name`` at ``value`` alone (a tool offered)."""
    taken = []
    for family, adapter in sorted(ADAPTERS.items()):
        try:
            adapter.check_settings(ModelSettings(**{name: value}), tool_names=["get_order"])
        except UnsupportedSetting:
            continue
        taken.append(family)
    return taken


@pytest.mark.django_db
def test_messages_state_the_most_items_taken(document: dict[str, Any], demo: DemoSeed) -> None:
    """``maxItems`` of ``messages`` is what a request may send: one more is 400 naming it."""
    most = document["components"]["schemas"]["OperationCreateRequest"]["properties"]["messages"]
    assert most["maxItems"] == 500
    client, _ = keyed_client(demo.tenant, READ, WRITE)
    message = {"role": "user", "text": "Earlier."}
    over = post(client, "/operations", create_body(messages=[message] * (most["maxItems"] + 1)))
    assert set(fields_of(error_of(over, 400, "invalid_request"))) == {"messages"}


def test_a_query_parameter_is_repeatable_where_the_document_says_it_is(
    document: dict[str, Any],
) -> None:
    for path, method, operation in operations_of(document):
        if method != "get":
            continue  # a POST, PUT or PATCH takes no query parameter
        arrays = {
            parameter["name"]
            for parameter in operation.get("parameters", [])
            if parameter["in"] == "query" and parameter["schema"].get("type") == "array"
        }
        view = resolve(re.sub(r"\{[^}]+\}", "x", path)).func.view_class  # type: ignore[attr-defined]
        assert set(view.repeatable) == arrays, path
    assert views.OperationsView.repeatable == ("metadata",)


def test_every_operation_documents_the_shared_statuses_and_headers(
    document: dict[str, Any],
) -> None:
    post = document["paths"]["/api/v1/operations"]["post"]
    assert {"400", "401", "403", "405", "406", "409", "413", "415", "429", "500"} <= set(
        post["responses"]
    )
    created = post["responses"]["201"]["headers"]
    assert {"Request-Id", "RateLimit-Limit", "Idempotent-Replayed"} <= set(created)
    assert "Retry-After" in post["responses"]["409"]["headers"]
    assert "Retry-After" in post["responses"]["429"]["headers"]
    live = document["paths"]["/api/v1/health/live"]["get"]["responses"]
    assert "401" not in live and "RateLimit-Limit" not in live["200"]["headers"]


def test_the_rules_catch_what_they_are_for(document: dict[str, Any]) -> None:
    broken = copy.deepcopy(document)
    operation = broken["paths"]["/api/v1/operations/{public_id}"]["get"]
    del operation["responses"]["404"]
    operation["responses"]["200"]["description"] = ""
    examples = operation["responses"]["200"]["content"]["application/json"]["examples"]
    next(iter(examples.values()))["value"]["state"] = "NAPPING"
    del broken["paths"]["/api/v1/operations/{public_id}/cancel"]["post"]["summary"]
    assert sorted(contract_problems(broken)) == sorted(
        [
            "POST /api/v1/operations/{public_id}/cancel: no summary",
            "GET /api/v1/operations/{public_id}: undocumented statuses 404",
            "GET /api/v1/operations/{public_id}: 200: no description",
            "GET /api/v1/operations/{public_id}: 200 application/json: example invalid at state: "
            "'NAPPING' is not one of "
            + repr(document["components"]["schemas"]["OperationStateEnum"]["enum"]),
        ]
    )


def test_the_rules_catch_a_post_that_documents_no_body(document: dict[str, Any]) -> None:
    """A POST read as taking no body would ignore what one holds (strict input refuses an
    unknown field), and its 413 and 415 would go unlisted though the server answers them."""
    broken = copy.deepcopy(document)
    where = "/api/v1/remote-servers/{name}/tools/{remote_name}/disable"
    operation = broken["paths"][where]["post"]
    operation.pop("requestBody", None)  # as drf-spectacular writes request=None
    for code in ("413", "415"):
        operation["responses"].pop(code, None)
    assert sorted(contract_problems(broken)) == [
        f"POST {where}: no request body (an action that takes no fields: request=NoFields)",
        f"POST {where}: undocumented statuses 413, 415",
    ]


def test_the_rules_catch_a_nullable_without_type_and_a_missing_read_only_field(
    document: dict[str, Any],
) -> None:
    broken = copy.deepcopy(document)
    properties = broken["components"]["schemas"]["Call"]["properties"]
    del properties["arguments"]["type"]  # as drf-spectacular writes an untyped JSON field
    properties["model_result"]["example"] = {"nullable": True}  # data, not a schema
    operation = broken["paths"]["/api/v1/operations/{public_id}"]["get"]
    examples = operation["responses"]["200"]["content"]["application/json"]["examples"]
    del next(iter(examples.values()))["value"]["follow_ups"]  # required, read-only
    assert sorted(contract_problems(broken)) == [
        "#/components/schemas/Call/properties/arguments: nullable without type",
        "GET /api/v1/operations/{public_id}: 200 application/json: example invalid at (root): "
        "'follow_ups' is a required property",
    ]


def test_a_remote_server_s_or_tool_s_absent_text_is_documented_as_null(
    document: dict[str, Any],
) -> None:
    """Responses: a string or null, never ""; requests: the text, "" or null (none given)."""
    schemas = document["components"]["schemas"]
    tool, server = schemas["RemoteTool"]["properties"], schemas["RemoteServer"]["properties"]
    absent = ["description", "problem", "pinned_sha256", "risk", "approval_condition"]
    for value in [*(tool[name] for name in absent), tool["url"], tool["reconcile_url"]]:
        assert (value["type"], value["nullable"]) == ("string", True), value
    assert server["url"] == tool["url"] == {
        "type": "string", "format": "uri", "nullable": True, "maxLength": 500
    }  # fmt: skip
    requests = [
        schemas["ServerCreateRequest"]["properties"]["url"],
        schemas["ServerCreateRequest"]["properties"]["signing_secret"],
        schemas["HttpToolCreateRequest"]["properties"]["reconcile_url"],
        schemas["ReviewRequest"]["properties"]["approval_condition"],
    ]
    for value in requests:
        assert value["anyOf"][1:] == [{"type": "string", "maxLength": 0}, {"enum": [None]}]
        assert value["anyOf"][0]["minLength"] == 1 and value["default"] == ""
    for name, field in [
        ("HttpToolCreateRequest", "description"),
        ("DecisionRequest", "reason"),
        ("ExtendRequest", "note"),
    ]:
        text = schemas[name]["properties"][field]
        assert (text["type"], text["nullable"], text["default"]) == ("string", True, "")


def test_a_nullable_object_or_choice_says_so_by_its_type_or_its_null_branch(
    document: dict[str, Any],
) -> None:
    schemas = document["components"]["schemas"]
    assert schemas["Call"]["properties"]["arguments"]["type"] == "object"
    assert schemas["Call"]["properties"]["arguments"]["nullable"] is True
    agent = schemas["Operation"]["properties"]["agent"]
    assert agent["oneOf"] == [{"$ref": "#/components/schemas/AgentRef"}, {"enum": [None]}]
    assert "nullable" not in agent
    assert schemas["Operation"]["properties"]["reason_code"]["oneOf"] == [
        {"$ref": "#/components/schemas/ReasonCodeEnum"},
        {"$ref": "#/components/schemas/NullEnum"},
    ]
    assert schemas["NullEnum"] == {"enum": [None]}
