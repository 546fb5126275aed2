"""Property-based tests of every API operation against the live OpenAPI schema: generated
requests, valid and invalid, never get a 5xx, and every response matches the documented schema.

The server is pytest-django's ``live_server`` on 127.0.0.1 with tasks in-process, so a generated
replay operation runs inside the request. Each operation is run with schemathesis' strategies
through Hypothesis directly (one subtest per operation): its explicit examples, valid and invalid
requests on generated IDs, and valid requests on real IDs (a parked refund and its approval).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from django.core.cache import cache
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pytest_django.live_server_helper import LiveServer
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.api.support import ALL_SCOPES, READ, WRITE, create, get, keyed_client, new_key
from toolcalls.demo.services import DemoSeed

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("eager_tasks")]

CHECKS = [not_a_server_error, response_schema_conformance]
#: Bounded and reproducible: ten derandomized examples per operation and mode, no example
#: database, no shrinking (a failure is reported as generated).
EXAMPLES = settings(
    max_examples=10,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture
def base_url(live_server: LiveServer) -> str:
    # ``live_server`` binds "localhost" on IPv4; name the address so no client tries ::1 first.
    return live_server.url.replace("://localhost:", "://127.0.0.1:")


@pytest.fixture
def real_ids(demo: DemoSeed) -> dict[str, str]:
    """A refund parked for approval, started by another service: ``operation`` and ``approval``."""
    client, _ = keyed_client(demo.tenant, READ, WRITE, name="starter")
    operation = create(client)
    (approval,) = get(client, "/approvals").json()["results"]
    return {"operation": operation["id"], "approval": approval["id"]}


@pytest.fixture
def headers(demo: DemoSeed) -> Callable[[], dict[str, str]]:
    """Headers for one request of a service holding every scope (a fresh ``Idempotency-Key``)."""
    _, full = new_key(demo.tenant, *ALL_SCOPES, name="schemathesis")
    cache.clear()  # the rate limit counts per key in the cache
    return lambda: {"Authorization": f"Bearer {full}", "Idempotency-Key": uuid.uuid4().hex}


def test_every_operation_conforms_to_the_live_schema(
    base_url: str,
    real_ids: dict[str, str],
    headers: Callable[[], dict[str, str]],
    subtests: pytest.Subtests,
) -> None:
    config = schemathesis.Config.from_dict({"seed": 20251130, "cache": {"enabled": False}})
    schema = schemathesis.openapi.from_url(f"{base_url}/api/schema/", config=config)
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()  # an operation schemathesis cannot read
        operations.append(result.ok())
    assert len(operations) >= 15  # every route of toolcalls.api.urls (test_api_conventions)

    def run(strategy: Any) -> None:
        @EXAMPLES
        @given(case=strategy)
        def check(case: Any) -> None:
            case.call_and_validate(base_url=base_url, headers=headers(), checks=CHECKS)

        check()

    for operation in operations:
        with subtests.test(msg=operation.label):
            examples = schema.get_strategies_from_examples(operation)
            if examples:
                run(st.one_of(examples))
            run(operation.as_strategy(GenerationMode.POSITIVE))
            if _has_inputs(operation):
                run(operation.as_strategy(GenerationMode.NEGATIVE))
            if "{public_id}" in operation.path:
                kind = "approval" if operation.path.startswith("/api/v1/approvals") else "operation"
                path_parameters = {"public_id": real_ids[kind]}
                run(operation.as_strategy(GenerationMode.POSITIVE, path_parameters=path_parameters))


def _has_inputs(operation: Any) -> bool:
    """Whether invalid requests can be generated: some parameter or a body."""
    return bool(list(operation.iter_parameters())) or bool(operation.body)
