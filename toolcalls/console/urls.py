from django.urls import path

from toolcalls.console import views

app_name = "operations"
urlpatterns = [
    path("", views.operations, name="list"),
    path("escalated/", views.escalations, name="escalations"),
    path("<str:public_id>/", views.operation_detail, name="detail"),
    path("<str:public_id>/extend/", views.operation_extend_view, name="extend"),
    path("<str:public_id>/stop/", views.operation_stop_view, name="stop"),
    path("<str:public_id>/fork/", views.operation_fork_view, name="fork"),
    path(
        "<str:public_id>/calls/<str:call_public_id>/resolve/",
        views.call_resolve_view,
        name="resolve",
    ),
]
