from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "toolcalls.demo"
    label = "demo"
    verbose_name = "Demo shop"
