"""A worker continues with the first wake-up of each step it runs; the others, and whatever is
left when its budget is spent, go through the broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from toolcalls.services import enqueue
from toolcalls.services.enqueue import continuing


class Steps:
    """Wakes its registered actions at once, as a step's commit would."""

    def wake(self, action: Callable[[], None]) -> None:
        action()


class FakeTask:
    """A task whose body wakes the items ``plan`` maps its argument to."""

    def __init__(self, plan: dict[int, list[int]], fail: frozenset[int] = frozenset()) -> None:
        self.name = "fake"
        self.plan, self.fail = plan, fail
        self.ran: list[int] = []
        self.sent: list[int] = []

    def run(self, pk: int) -> None:
        with continuing():
            self.ran.append(pk)
            if pk in self.fail:
                raise RuntimeError("boom")
            for woken in self.plan.get(pk, []):
                enqueue._wake(Steps(), self, woken)  # type: ignore[arg-type]

    def apply_async(self, args: list[int], countdown: Any = None) -> None:
        self.sent.append(args[0])


def test_the_first_wake_up_of_each_step_runs_here_and_the_others_go_to_the_broker() -> None:
    task = FakeTask({1: [2, 3], 2: [4], 4: [5]})
    task.run(1)
    assert task.ran == [1, 2, 4, 5]
    assert task.sent == [3]


@override_settings(CALLGATE_WORKER_CONTINUE_STEPS=2)
def test_what_is_left_when_the_budget_is_spent_goes_back_to_the_queue() -> None:
    task = FakeTask({1: [2], 2: [3], 3: [4]})
    task.run(1)
    assert task.ran == [1, 2, 3]
    assert task.sent == [4]


@override_settings(CALLGATE_WORKER_CONTINUE_STEPS=0)
def test_a_budget_of_zero_sends_every_wake_up_through_the_broker() -> None:
    task = FakeTask({1: [2]})
    task.run(1)
    assert (task.ran, task.sent) == ([1], [2])


def test_a_delayed_wake_up_always_goes_through_the_broker() -> None:
    task = FakeTask({})
    with continuing():
        enqueue._wake(Steps(), task, 7, countdown_s=2.0)  # type: ignore[arg-type]
    assert (task.ran, task.sent) == ([], [7])


def test_a_continued_step_that_fails_is_logged_and_continuing_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    task = FakeTask({1: [2], 2: [3]}, fail=frozenset({2}))
    task.run(1)
    assert task.ran == [1, 2] and task.sent == []
    assert "continued fake(2) failed" in caplog.text


def test_outside_a_task_every_wake_up_goes_through_the_broker() -> None:
    task = FakeTask({})
    enqueue._wake(Steps(), task, 9)  # type: ignore[arg-type]
    assert task.sent == [9]
