from django.http import HttpRequest

from approvals.selectors import PENDING_COUNT_CAP, approvals_pending_count


def pending_count(request: HttpRequest) -> dict[str, object]:
    """``pending_count`` for the console header (capped) for signed-in users."""
    if not request.user.is_authenticated:
        return {}
    count = approvals_pending_count(user=request.user)
    return {"pending_count": f"{count}+" if count >= PENDING_COUNT_CAP else count}
