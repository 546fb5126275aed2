from django.http import HttpRequest

from approvals.selectors import PENDING_COUNT_CAP, approvals_pending_count


def pending_count(request: HttpRequest) -> dict[str, object]:
    """``pending_count`` for the console header (capped) for signed-in users. A page rendered
    before the request reached authentication (Django's 400 for a host not served) has no user:
    nothing then."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    count = approvals_pending_count(user=user)
    return {"pending_count": f"{count}+" if count >= PENDING_COUNT_CAP else count}
