from django import forms


class DecisionForm(forms.Form):
    """The reason travels to the model on a denial, so a denial must give one."""

    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, max_length=1000
    )

    def __init__(self, *args: object, decision: str, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["reason"].required = decision == "deny"
        self.fields["reason"].label = "Reason (sent to the model)" if decision == "deny" else "Note"
