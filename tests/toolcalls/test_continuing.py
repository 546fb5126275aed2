"""A worker continues with the first wake-up of each step it runs; the others, and whatever is
left when its budget is spent, go through the broker. A step may claim the work of the wake-up
it would continue with (``WakeUp.claim``): that work runs first, and nobody else is woken for
it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

import pytest
from django.test import override_settings

from toolcalls.services import enqueue
from toolcalls.services.enqueue import Claimed, WakeUp, continuing


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


@pytest.fixture
def claimed() -> Iterator[list[int]]:
    """What the fake task's claimer claimed and ran (the claimer claims every pk but 0, for
    which its step settles the work instead)."""
    ran: list[int] = []

    def claimer(step: Any, pk: int) -> Claimed:
        return Claimed(partial(ran.append, pk) if pk else None)

    registered = enqueue._registered()
    enqueue.workers_register(replace(registered, claimers={"fake": claimer}))
    try:
        yield ran
    finally:
        enqueue.workers_register(registered)


def test_claimed_work_runs_first_and_the_step_s_other_wake_ups_go_to_the_broker(
    claimed: list[int],
) -> None:
    task = FakeTask({})
    with continuing():
        run = WakeUp(task, 1).claim(step=None)  # type: ignore[arg-type]
        assert run is not None
        run()  # the step commits
        enqueue._wake(Steps(), task, 2)  # type: ignore[arg-type]
    assert (claimed, task.sent) == ([1], [2])


def test_work_its_step_settled_when_claiming_it_leaves_nothing_to_run(
    claimed: list[int],
) -> None:
    task = FakeTask({})
    with continuing():
        run = WakeUp(task, 0).claim(step=None)  # type: ignore[arg-type]
        assert run is not None
        run()
        enqueue._wake(Steps(), task, 2)  # type: ignore[arg-type]
    assert (claimed, task.ran, task.sent) == ([], [2], [])


@pytest.mark.parametrize("countdown_s", [None, 2.0])
def test_nothing_is_claimed_without_budget_or_for_later(
    claimed: list[int], settings: Any, countdown_s: float | None
) -> None:
    settings.CALLGATE_WORKER_CONTINUE_STEPS = 0 if countdown_s is None else 5
    with continuing():
        assert WakeUp(FakeTask({}), 1, countdown_s).claim(step=None) is None  # type: ignore[arg-type]
    assert claimed == []


def test_outside_a_task_nothing_is_claimed(claimed: list[int]) -> None:
    assert WakeUp(FakeTask({}), 1).claim(step=None) is None  # type: ignore[arg-type]


def test_work_claimed_by_a_continued_step_that_fails_still_runs(
    claimed: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    class Failing(FakeTask):
        def run(self, pk: int) -> None:
            with continuing():
                if pk == 2:
                    run = WakeUp(self, 5).claim(step=None)  # type: ignore[arg-type]
                    assert run is not None
                    run()  # committed with the step
                    raise RuntimeError("boom")
                enqueue._wake(Steps(), self, 2)  # type: ignore[arg-type]

    Failing({}).run(1)
    assert claimed == [5]
    assert "continued fake(2) failed" in caplog.text
