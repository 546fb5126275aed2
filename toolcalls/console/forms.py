"""Console forms for escalated operations."""

from __future__ import annotations

from typing import Any

from django import forms

from toolcalls.guards import GUARDS
from toolcalls.services.reconcile import RESOLUTIONS


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
