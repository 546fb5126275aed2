from django.urls import path

from toolcalls import views

app_name = "operations"
urlpatterns = [
    path("<str:public_id>/", views.operation_detail, name="detail"),
]
