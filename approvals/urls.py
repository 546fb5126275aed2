from django.urls import path

from approvals import views

app_name = "approvals"
urlpatterns = [
    path("", views.queue, name="queue"),
    path("decided/", views.decisions, name="decisions"),
    path("bulk/", views.bulk, name="bulk"),
    path("<str:public_id>/", views.detail, name="detail"),
    path("<str:public_id>/<str:decision>/", views.decide, name="decide"),
]
