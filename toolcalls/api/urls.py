from django.urls import path

from toolcalls.api import views

urlpatterns = [
    path("operations", views.OperationsView.as_view(), name="api-operations"),
    path("operations/<str:public_id>", views.OperationDetailView.as_view(), name="api-operation"),
    path(
        "operations/<str:public_id>/cancel",
        views.OperationCancelView.as_view(),
        name="api-operation-cancel",
    ),
    path(
        "operations/<str:public_id>/extend",
        views.OperationExtendView.as_view(),
        name="api-operation-extend",
    ),
    path(
        "operations/<str:public_id>/stop",
        views.OperationStopView.as_view(),
        name="api-operation-stop",
    ),
    path(
        "operations/<str:public_id>/fork",
        views.OperationForkView.as_view(),
        name="api-operation-fork",
    ),
    path(
        "operations/<str:public_id>/turns",
        views.OperationTurnsView.as_view(),
        name="api-operation-turns",
    ),
    path(
        "operations/<str:public_id>/calls",
        views.OperationCallsView.as_view(),
        name="api-operation-calls",
    ),
    path(
        "operations/<str:public_id>/events",
        views.OperationEventsView.as_view(),
        name="api-operation-events",
    ),
    path("tools", views.ToolsView.as_view(), name="api-tools"),
    path("health/live", views.LivenessView.as_view(), name="api-health-live"),
    path("health/ready", views.ReadinessView.as_view(), name="api-health-ready"),
]
