"""The refund flow through the Python client generated from the API's schema, and nothing else:
a service starts a refund, waits for it to park, a second service approves it, and the first
reads the outcome. ``tests/api/test_generated_client.py`` generates the client
(``callgate_client``), type-checks this script with ``mypy --strict`` and runs it against a live
server with a real worker.

    python refund_flow.py BASE_URL STARTER_KEY REVIEWER_KEY SCENARIO_FILE

prints one JSON line: the operation's ID, final state and text, and the approval's decider.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import TypeVar

from callgate_client import AuthenticatedClient
from callgate_client.api.approvals import approvals_decide_create, operations_approvals_list
from callgate_client.api.operations import operations_create, operations_retrieve
from callgate_client.models import (
    Approval,
    ApprovalStateEnum,
    DecisionEnum,
    DecisionRequest,
    Error,
    FamilyEnum,
    Operation,
    OperationCreateRequest,
    OperationCreateRequestRepliesItem,
    OperationCreateTransportEnum,
    OperationStateEnum,
    PaginatedApprovalList,
)

T = TypeVar("T")


def expect(parsed: T | Error | None, kind: type[T]) -> T:
    """The parsed body when it is a ``kind``; exits with the error otherwise."""
    if isinstance(parsed, Error):
        sys.exit(f"{parsed.error.code}: {parsed.error.message} ({parsed.error.request_id})")
    if not isinstance(parsed, kind):
        sys.exit(f"unexpected response: {parsed!r}")
    return parsed


def wait(client: AuthenticatedClient, operation_id: str, *, until_ended: bool) -> Operation:
    """Poll the operation until it parks for a person (or, ``until_ended``, until it ended)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        operation = expect(operations_retrieve.sync(operation_id, client=client), Operation)
        parked = operation.state is OperationStateEnum.WAITING_APPROVAL
        if operation.ended or (parked and not until_ended):
            return operation
        time.sleep(0.2)
    sys.exit(f"{operation_id} did not get there in time")


def main(base_url: str, starter_key: str, reviewer_key: str, scenario_file: str) -> None:
    starter = AuthenticatedClient(base_url=base_url, token=starter_key)
    reviewer = AuthenticatedClient(base_url=base_url, token=reviewer_key)
    scenario = json.loads(Path(scenario_file).read_text())
    body = OperationCreateRequest(
        family=FamilyEnum(scenario["family"]),
        model="gpt-5.1",
        input_=scenario["input"],
        subject_ref="cus_1001",
        transport=OperationCreateTransportEnum.REPLAY,
        replies=[OperationCreateRequestRepliesItem.from_dict(r) for r in scenario["replies"]],
    )
    created = expect(
        operations_create.sync(client=starter, body=body, idempotency_key=uuid.uuid4().hex),
        Operation,
    )
    parked = wait(starter, created.id, until_ended=False)
    assert parked.state is OperationStateEnum.WAITING_APPROVAL, parked.terminal_reason
    page = expect(operations_approvals_list.sync(created.id, client=starter), PaginatedApprovalList)
    pending: Approval = page.results[0]
    decided = expect(
        approvals_decide_create.sync(
            pending.id,
            client=reviewer,
            body=DecisionRequest(decision=DecisionEnum.APPROVE),
            idempotency_key=uuid.uuid4().hex,
        ),
        Approval,
    )
    assert decided.state is ApprovalStateEnum.APPROVED
    done = wait(starter, created.id, until_ended=True)
    # Always-present fields are plain types: no Unset and no None to narrow away.
    state: OperationStateEnum = done.state
    turns: int = done.counters.turns
    decider: str | None = decided.decided_by
    print(
        json.dumps(
            {
                "operation": done.id,
                "state": state.value,
                "turns": turns,
                "final_text": done.final_text,
                "decided_by": decider,
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
