"""Console forms: escalated operations, the operations list, a person's settings."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, ClassVar

from django import forms
from django.utils import timezone

from toolcalls.console.models import TIMEZONES
from toolcalls.guards import GUARDS
from toolcalls.models import REASON_MAX_LENGTH
from toolcalls.selectors import OperationFilters
from toolcalls.services.reconcile import RESOLUTIONS
from toolcalls.states import OperationState


class ExtendForm(forms.Form):
    """One optional field per budget, showing the current limit; blank keeps it."""

    note = forms.CharField(required=False, max_length=500)

    def __init__(self, *args: Any, budgets: dict[str, float], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, (_code, unit) in GUARDS.items():
            self.fields[name] = forms.FloatField(
                required=False, min_value=0, label=f"{name} ({unit})", initial=budgets.get(name)
            )

    def changes(self) -> dict[str, float | int]:
        """The budgets the operator changed, as numbers (integers where they are whole)."""
        initial = {name: self.fields[name].initial for name in GUARDS}
        changed: dict[str, float | int] = {}
        for name in GUARDS:
            value = self.cleaned_data.get(name)
            if value is not None and value != initial[name]:
                changed[name] = int(value) if float(value).is_integer() else value
        return changed


#: What a fork's turn field says when it names no turn (missing, not a number, negative).
_NO_TURN = "Choose a turn of this operation."


class ForkForm(forms.Form):
    """Fork an operation from one of its turns (its index), with another model if one is given.
    Each refusal names its field: a turn that is not one, a model name over 100 characters or
    holding a NUL."""

    from_turn = forms.IntegerField(
        min_value=0,
        label="Turn",
        error_messages={"required": _NO_TURN, "invalid": _NO_TURN, "min_value": _NO_TURN},
    )
    model = forms.CharField(
        required=False,
        max_length=100,
        label="Model",
        error_messages={"max_length": "A model name is at most 100 characters."},
    )


class StopForm(forms.Form):
    reason = forms.CharField(max_length=REASON_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 2}))


class ResolveForm(forms.Form):
    resolution = forms.ChoiceField(
        choices=[
            ("applied", "It happened"),
            ("not_applied", "It did not happen"),
            ("unknown", "Nobody can tell"),
        ]
    )
    note = forms.CharField(required=False, max_length=500)

    def clean_resolution(self) -> str:
        value: str = self.cleaned_data["resolution"]
        assert value in RESOLUTIONS
        return value


#: The code of a filter error the console words itself (:attr:`FilterForm.ranges`): the page
#: shows its message. Django's own messages are not shown: some quote what was sent.
EXPLAINED = "explained"


class FilterForm(forms.Form):
    """A list's filters (GET), applied field by field: each field that validates filters the
    list, each that does not is ignored. The ignored fields keep their errors (the page names
    them by label) and are shown blank, so the form shows exactly the filters applied.

    ``ranges`` name each pair of fields bounding one value, ``(low, high, message)``: a low
    above its high is an error on the low field, ``message`` saying why (code
    :data:`EXPLAINED`), so that bound is ignored and the page says why, where both would
    match nothing without a word."""

    ranges: ClassVar[tuple[tuple[str, str, str], ...]] = ()

    def applied(self) -> dict[str, Any]:
        """The cleaned values of the fields that validated (``{}`` for an unbound form)."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return self.cleaned_data

    def offer(self, name: str, *, anything: str, values: list[str]) -> None:
        """Give choice field ``name`` the choices ``values``, after a blank one labelled
        ``anything`` (no filter)."""
        field = self.fields[name]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", anything), *[(value, value) for value in values]]

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        for low, high, message in self.ranges:
            start, end = cleaned.get(low), cleaned.get(high)
            if start is not None and end is not None and start > end:
                self.add_error(low, forms.ValidationError(message, code=EXPLAINED))
        return cleaned

    def full_clean(self) -> None:
        super().full_clean()
        if self.is_bound and self.errors:
            # Rendered from what was sent, an ignored field would show a filter not applied.
            # Each filter takes one value (the last sent, as a widget reads a query string).
            self.data = {name: self.data[name] for name in self.data if name not in self.errors}

    def query(self) -> dict[str, str]:
        """The valid filters as query-string parameters (for links to the other pages)."""
        return {name: str(value) for name, value in self.applied().items() if value}

    def not_understood(self) -> list[str]:
        """The labels of the fields ignored for an error of Django's, in the form's order."""
        return [label for label, why in self._ignored() if not why]

    def explained(self) -> list[tuple[str, str]]:
        """``(label, why)`` of each field ignored for an :data:`EXPLAINED` error, in the
        form's order, ``why`` its message."""
        return [(label, why) for label, why in self._ignored() if why]

    def _ignored(self) -> list[tuple[str, str]]:
        errors = self.errors.as_data()
        return [
            (
                str(field.label),
                "; ".join(str(e.message) for e in errors[name] if e.code == EXPLAINED),
            )
            for name, field in self.fields.items()
            if name in errors
        ]


#: Why a "from" day after its "to" day is ignored (:attr:`FilterForm.ranges` of the lists
#: filtered by days).
DAYS_INVERTED = "it is after the last day"


def day_start(day: date) -> datetime:
    """The first instant of ``day`` in the current time zone, in UTC. Raises ``OverflowError``
    when that instant is outside the years 1 to 9999 in UTC (a day at the calendar's edge)."""
    start = datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())
    return start.astimezone(UTC)


def day_end(day: date) -> datetime:
    """The first instant after ``day`` (the next day's start), in UTC. Raises ``OverflowError``
    as :func:`day_start` does, and for the calendar's last day."""
    return day_start(day + timedelta(days=1))


class DayField(forms.DateField):
    """A day in the viewer's time zone, entered with a date picker; refused when ``bound``
    (:func:`day_start` or :func:`day_end`) gives it no instant (a day at the calendar's
    edge). The cleaned value is the day, ``bound(day)`` the UTC instant a filter compares."""

    def __init__(self, *, label: str, bound: Callable[[date], datetime]) -> None:
        super().__init__(
            required=False, label=label, widget=forms.DateInput(attrs={"type": "date"})
        )
        self.bound = bound

    def clean(self, value: Any) -> date | None:
        day: date | None = super().clean(value)
        if day is not None:
            try:
                self.bound(day)
            except OverflowError:
                raise forms.ValidationError(
                    "This day is too far in the past or the future."
                ) from None
        return day


class OperationFilterForm(FilterForm):
    """Filters of the operations list (GET); dates are days in the viewer's time zone."""

    state = forms.ChoiceField(
        required=False,
        label="State",
        choices=[("", "any state"), *[(s, s) for s in OperationState.values]],
    )
    tool = forms.ChoiceField(required=False, label="Tool used")
    customer = forms.CharField(required=False, max_length=200, label="Customer")
    agent = forms.CharField(
        required=False,
        max_length=60,
        label="Agent",
        help_text="A profile's name, or name@revision.",
    )
    created_from = DayField(label="Created from", bound=day_start)
    created_to = DayField(label="Created to", bound=day_end)
    ranges = (("created_from", "created_to", DAYS_INVERTED),)

    def __init__(self, *args: Any, tools: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.offer("tool", anything="any tool", values=tools)

    def filters(self) -> OperationFilters:
        """The valid filters (:meth:`FilterForm.applied`); "to" includes its whole day. The
        dates bound ``created_at`` as UTC instants."""
        data = self.applied()
        start, end = data.get("created_from"), data.get("created_to")
        return OperationFilters(
            state=data.get("state", ""),
            tool=data.get("tool", ""),
            customer=data.get("customer", "").strip(),
            agent=data.get("agent", "").strip(),
            created_from=day_start(start) if start else None,
            created_to=day_end(end) if end else None,
        )


class SettingsForm(forms.Form):
    timezone = forms.ChoiceField(
        label="Show dates in the time zone",
        choices=[(name, name) for name in TIMEZONES],
        help_text="Dates show UTC when you hover over them.",
    )
