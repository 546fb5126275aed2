"""Console forms for deciding approvals."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from toolcalls.registry import RISKS

#: Deepest edited arguments accepted, as the API accepts in a body: tool arguments nest a few
#: levels, and validating and canonicalizing recurse, so a deeper value would end in
#: RecursionError (a 500) instead of a message.
MAX_ARGUMENT_DEPTH = 64
_TOO_DEEP = f"The arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels."


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
        """The edited arguments as a JSON object, or ``None`` when left as proposed."""
        text = self.cleaned_data.get("arguments", "")
        if not text.strip():
            return None
        try:
            value = json.loads(text)
        except RecursionError:  # the parser's own limit, far above ours
            raise forms.ValidationError(_TOO_DEEP) from None
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("The arguments must be one JSON object.")
        if _nested_deeper_than(value, MAX_ARGUMENT_DEPTH):
            raise forms.ValidationError(_TOO_DEEP)
        return None if value == json.loads(self.original or "null") else value


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether parsed JSON holds more than ``limit`` nested objects and arrays. Iterative, as
    the depth is the client's choice."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack += [(child, depth + 1) for child in children]
    return False


class QueueFilterForm(forms.Form):
    """Filters of the approval queue (GET)."""

    tool = forms.ChoiceField(required=False)
    risk = forms.ChoiceField(
        required=False, choices=[("", "any risk"), *[(risk, risk) for risk in RISKS]]
    )
    tenant = forms.ChoiceField(required=False)
    expiring = forms.BooleanField(required=False, label="expiring within 15 minutes")

    def __init__(self, *args: Any, tools: list[str], tenants: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        tool, tenant = self.fields["tool"], self.fields["tenant"]
        assert isinstance(tool, forms.ChoiceField) and isinstance(tenant, forms.ChoiceField)
        tool.choices = [("", "any tool"), *[(name, name) for name in tools]]
        tenant.choices = [("", "any tenant"), *[(slug, slug) for slug in tenants]]
