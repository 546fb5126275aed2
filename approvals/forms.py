"""Console forms for deciding approvals."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from django import forms

from approvals.selectors import DecisionFilters, QueueFilters
from approvals.services import REASON_REQUIRED
from approvals.states import ApprovalState
from toolcalls.console.forms import DAYS_INVERTED, DayField, FilterForm, day_end, day_start
from toolcalls.registry import RISKS
from toolcalls.text import visible
from toolcalls.typed_json import typed_json

#: How much of an error on the edited arguments the decide page shows: a message quoting a
#: value (a schema's "'…' does not match …") is cut here: the arguments themselves are in the box.
ERROR_SHOWN = 500


def _shortened(message: str) -> str:
    if len(message) <= ERROR_SHOWN:
        return message
    left = len(message) - ERROR_SHOWN
    return f"{message[:ERROR_SHOWN]}… ({left:,} more characters not shown: the arguments are below)"


class DecisionForm(forms.Form):
    """Approve (optionally with edited arguments) or deny (with a reason for the model)."""

    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=1000
    )
    arguments = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false", "class": "code"}),
        required=False,
        label="Arguments (edit to approve with changes)",
    )

    def __init__(self, *args: Any, decision: str, arguments: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.original = arguments
        self.fields["reason"].required = decision == "deny"
        self.fields["reason"].label = "Reason (sent to the model)" if decision == "deny" else "Note"
        if decision == "deny":
            del self.fields["arguments"]
        else:
            self.fields["arguments"].initial = arguments

    def clean_arguments(self) -> Any:
        """The edited arguments as a JSON object, or ``None`` when left as proposed; read as the
        API reads a body (:func:`~toolcalls.typed_json.typed_json`)."""
        text = self.cleaned_data.get("arguments", "")
        if not text.strip():
            return None
        value = typed_json(text)
        if not isinstance(value, dict):
            raise forms.ValidationError("The arguments must be one JSON object.")
        return None if value == json.loads(self.original or "null") else value

    def add_error(self, field: str | None, error: Any) -> None:
        """An error on the arguments, the form's own or the service's, is shown cut to
        :data:`ERROR_SHOWN` characters: the box already holds what was typed, so a megabyte
        argument quoted by its error is not on the page twice."""
        if field == "arguments":
            error = forms.ValidationError([_shortened(m) for m in _messages(error)])
        super().add_error(field, error)


def _messages(error: Any) -> list[str]:
    return error.messages if isinstance(error, forms.ValidationError) else [str(error)]


#: What the expiring box sends ticked ("on") and what the queue's links write ("1").
_TICKED = ("on", "1")


class _RawCheckbox(forms.CheckboxInput):
    """A checkbox that gives its field the text as sent (``""`` when absent), so the field can
    refuse what no checkbox sends (``CheckboxInput`` reads any text but "false" as ticked), and
    is shown ticked only for :data:`_TICKED`."""

    def __init__(self) -> None:
        super().__init__(check_test=lambda value: value in _TICKED)

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        return data.get(name, "")


#: Why an "Amount from" above the "Amount to" is ignored (the page says so).
AMOUNT_INVERTED = "the minimum is above the maximum"


class QueueFilterForm(FilterForm):
    """Filters and order of the approval queue (GET); every control has a visible label."""

    tool = forms.ChoiceField(required=False, label="Tool")
    risk = forms.ChoiceField(
        required=False,
        label="Risk",
        choices=[("", "any risk"), *[(risk, risk) for risk in RISKS]],
    )
    tenant = forms.ChoiceField(required=False, label="Tenant")
    requester = forms.CharField(required=False, max_length=150, label="Requested by")
    amount_min = forms.DecimalField(
        required=False, min_value=0, max_digits=14, decimal_places=2, label="Amount from"
    )
    amount_max = forms.DecimalField(
        required=False, min_value=0, max_digits=14, decimal_places=2, label="Amount to"
    )
    expiring = forms.ChoiceField(
        required=False,
        label="Expiring within 15 minutes",
        choices=[(value, "yes") for value in _TICKED],
        widget=_RawCheckbox,
    )
    sort = forms.ChoiceField(
        required=False,
        label="Sort by",
        choices=[
            ("expiry", "soonest expiry"),
            ("age", "oldest first"),
            ("amount", "largest amount"),
            ("risk", "highest risk"),
        ],
    )

    ranges = (("amount_min", "amount_max", AMOUNT_INVERTED),)

    def __init__(self, *args: Any, tools: list[str], tenants: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.offer("tool", anything="any tool", values=tools)
        self.offer("tenant", anything="any tenant", values=tenants)

    def filters(self) -> QueueFilters:
        """The valid filters (:meth:`~toolcalls.console.forms.FilterForm.applied`), amounts
        in cents."""
        data = self.applied()
        return QueueFilters(
            tool=data.get("tool", ""),
            risk=data.get("risk", ""),
            tenant=data.get("tenant", ""),
            requester=data.get("requester", "").strip(),
            amount_min=_cents(data.get("amount_min")),
            amount_max=_cents(data.get("amount_max")),
            expiring=bool(data.get("expiring")),
            sort=data.get("sort") or "expiry",
        )


def _cents(amount: Decimal | None) -> int | None:
    return None if amount is None else int(amount * 100)


class DecisionFilterForm(FilterForm):
    """Filters of the decisions history (GET); the days are the viewer's time zone's."""

    state = forms.ChoiceField(
        required=False,
        label="Decision",
        choices=[("", "any decision"), *[(s, s.lower()) for s in ApprovalState.values[1:]]],
    )
    tool = forms.ChoiceField(required=False, label="Tool")
    customer = forms.CharField(required=False, max_length=200, label="Customer")
    requester = forms.CharField(required=False, max_length=150, label="Requested by")
    decided_by = forms.CharField(required=False, max_length=150, label="Decided by")
    decided_from = DayField(label="Decided from", bound=day_start)
    decided_to = DayField(label="Decided to", bound=day_end)
    ranges = (("decided_from", "decided_to", DAYS_INVERTED),)

    def __init__(self, *args: Any, tools: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.offer("tool", anything="any tool", values=tools)

    def filters(self) -> DecisionFilters:
        """The valid filters (:meth:`~toolcalls.console.forms.FilterForm.applied`); "to"
        includes its whole day, both bound ``decided_at`` as UTC instants."""
        data = self.applied()
        start, end = data.get("decided_from"), data.get("decided_to")
        return DecisionFilters(
            state=data.get("state", ""),
            tool=data.get("tool", ""),
            customer=data.get("customer", "").strip(),
            requester=data.get("requester", "").strip(),
            decided_by=data.get("decided_by", "").strip(),
            decided_from=day_start(start) if start else None,
            decided_to=day_end(end) if end else None,
        )


#: What the bulk form says of a decision missing, unknown or sent more than once.
_ONE_DECISION = "Choose one decision: approve or deny."


class BulkDecisionForm(forms.Form):
    """Approve or deny the approvals ticked in the queue (public IDs), with one reason. Refused
    (``is_valid`` false, each error saying why) with nothing ticked, over :data:`MAX_BULK`
    ticked, with a decision missing, unknown or sent more than once (``approve`` and ``deny``
    together would otherwise be read as the last one sent), or a denial without a reason
    (each approval would refuse it: :data:`~approvals.services.REASON_REQUIRED`)."""

    approval = forms.MultipleChoiceField(
        required=True, error_messages={"required": "Tick at least one approval."}
    )
    decision = forms.ChoiceField(
        choices=[("approve", "approve"), ("deny", "deny")],
        error_messages={"required": _ONE_DECISION, "invalid_choice": _ONE_DECISION},
    )
    reason = forms.CharField(required=False, max_length=1000)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["approval"]
        assert isinstance(field, forms.MultipleChoiceField)
        # Any ID is accepted here; the view keeps those of the user's tenants.
        field.choices = [(value, value) for value in self.ticked()]

    def clean_approval(self) -> list[str]:
        values: list[str] = self.cleaned_data["approval"]
        if len(values) > MAX_BULK:
            raise forms.ValidationError(f"Decide at most {MAX_BULK} approvals at once.")
        return values

    def clean_decision(self) -> str:
        value: str = self.cleaned_data["decision"]
        if len(self._sent("decision")) > 1:
            raise forms.ValidationError(_ONE_DECISION)
        return value

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if cleaned.get("decision") == "deny" and not visible(cleaned.get("reason", "")):
            self.add_error("reason", REASON_REQUIRED)
        return cleaned

    def ticked(self) -> list[str]:
        """The public IDs sent ticked, valid or not (to show them ticked again)."""
        return self._sent("approval")

    def _sent(self, name: str) -> list[str]:
        """Every value sent as ``name``, in order (``[]`` from data that keeps one a name)."""
        return list(self.data.getlist(name)) if hasattr(self.data, "getlist") else []


#: Approvals one bulk decision takes at most (a queue page).
MAX_BULK = 50
