from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        from approvals.services import ApprovalDesk
        from toolcalls.services.desk import approval_desk_register

        # The engine parks calls, revalidates approvals and supersedes those of an ending
        # operation through this app's desk; it never imports the app.
        approval_desk_register(ApprovalDesk())
