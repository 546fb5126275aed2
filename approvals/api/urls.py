from django.urls import path

from approvals.api import views

urlpatterns = [
    path("approvals", views.ApprovalsView.as_view(), name="api-approvals"),
    path(
        "operations/<str:public_id>/approvals",
        views.OperationApprovalsView.as_view(),
        name="api-operation-approvals",
    ),
    path("approvals/<str:public_id>", views.ApprovalDetailView.as_view(), name="api-approval"),
    path(
        "approvals/<str:public_id>/decide",
        views.ApprovalDecideView.as_view(),
        name="api-approval-decide",
    ),
]
