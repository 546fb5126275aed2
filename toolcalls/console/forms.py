"""Console forms: escalated operations, the operations list, a person's settings."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from django import forms
from django.utils import timezone

from toolcalls.console.models import TIMEZONES
from toolcalls.guards import GUARDS
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


class ForkForm(forms.Form):
    from_turn = forms.IntegerField(min_value=0)
    model = forms.CharField(required=False, max_length=100)


class StopForm(forms.Form):
    reason = forms.CharField(max_length=500, widget=forms.Textarea(attrs={"rows": 2}))


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


class OperationFilterForm(forms.Form):
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
    created_from = forms.DateField(
        required=False, label="Created from", widget=forms.DateInput(attrs={"type": "date"})
    )
    created_to = forms.DateField(
        required=False, label="Created to", widget=forms.DateInput(attrs={"type": "date"})
    )

    def __init__(self, *args: Any, tools: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tool = self.fields["tool"]
        assert isinstance(tool, forms.ChoiceField)
        tool.choices = [("", "any tool"), *[(name, name) for name in tools]]

    def filters(self) -> OperationFilters:
        """The valid filters (an invalid form filters nothing); "to" includes its whole day."""
        data = self.cleaned_data if self.is_valid() else {}
        start, end = data.get("created_from"), data.get("created_to")
        return OperationFilters(
            state=data.get("state", ""),
            tool=data.get("tool", ""),
            customer=data.get("customer", "").strip(),
            agent=data.get("agent", "").strip(),
            created_from=_day_start(start) if start else None,
            created_to=_day_start(end + timedelta(days=1)) if end else None,
        )

    def query(self) -> dict[str, str]:
        """The filters as query-string parameters (for links to the next page)."""
        data = self.cleaned_data if self.is_valid() else {}
        return {name: str(value) for name, value in data.items() if value}


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


class SettingsForm(forms.Form):
    timezone = forms.ChoiceField(
        label="Show dates in the time zone",
        choices=[(name, name) for name in TIMEZONES],
        help_text="Dates show UTC when you hover over them.",
    )
