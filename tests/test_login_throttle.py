"""Failed sign-ins are limited per user name and address, on the console's and the admin's
sign-in pages: past the limit the password is not even checked, and the answer is 429."""

from __future__ import annotations

import time
from collections.abc import Iterator
from unittest import mock

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

RIGHT = {"username": "operator", "password": "operator-demo-pass"}
WRONG = {"username": "operator", "password": "not-the-password"}


@pytest.fixture(autouse=True)
def _counts_forgotten() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def _failed(client: Client, url: str, times: int, username: str = "operator") -> None:
    for _ in range(times):
        response = client.post(url, {"username": username, "password": "not-the-password"})
        assert response.status_code == 200  # the form again, saying they did not match


def test_past_the_limit_even_the_right_password_is_refused_without_being_checked(demo) -> None:
    client = Client(REMOTE_ADDR="203.0.113.7")
    _failed(client, reverse("login"), settings.CALLGATE_LOGIN_FAILURES)

    with mock.patch("django.contrib.auth.backends.ModelBackend.authenticate") as checked:
        response = client.post(reverse("login"), RIGHT)
    assert checked.call_count == 0
    assert response.status_code == 429
    assert 0 < int(response["Retry-After"]) <= settings.CALLGATE_LOGIN_WINDOW_S
    assert "Too many failed sign-ins" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_other_user_names_and_addresses_are_not_held_back(demo) -> None:
    client = Client(REMOTE_ADDR="203.0.113.7")
    _failed(client, reverse("login"), settings.CALLGATE_LOGIN_FAILURES)

    other_address = Client(REMOTE_ADDR="198.51.100.4")
    assert other_address.post(reverse("login"), RIGHT).status_code == 302
    other_user = {"username": "support", "password": "support-demo-pass"}
    assert client.post(reverse("login"), other_user).status_code == 302


def test_the_user_name_is_counted_in_any_case(demo) -> None:
    client = Client(REMOTE_ADDR="203.0.113.7")
    _failed(client, reverse("login"), settings.CALLGATE_LOGIN_FAILURES, username="OPERATOR")
    assert client.post(reverse("login"), RIGHT).status_code == 429


def test_a_successful_sign_in_forgets_the_failures_before_it(demo) -> None:
    client = Client(REMOTE_ADDR="203.0.113.7")
    _failed(client, reverse("login"), settings.CALLGATE_LOGIN_FAILURES - 1)
    assert client.post(reverse("login"), RIGHT).status_code == 302
    client.logout()

    _failed(client, reverse("login"), settings.CALLGATE_LOGIN_FAILURES - 1)
    assert client.post(reverse("login"), RIGHT).status_code == 302


def test_sign_ins_are_taken_again_once_the_failures_leave_the_window(demo) -> None:
    client = Client(REMOTE_ADDR="203.0.113.7")
    _failed(client, reverse("login"), settings.CALLGATE_LOGIN_FAILURES)
    assert client.post(reverse("login"), WRONG).status_code == 429

    later = time.time() + settings.CALLGATE_LOGIN_WINDOW_S + 1
    with mock.patch("config.login_throttle.time.time", return_value=later):
        assert client.post(reverse("login"), RIGHT).status_code == 302


def test_the_admin_sign_in_is_limited_too(demo) -> None:
    get_user_model().objects.create_superuser("root", password="root-secret-pass-1")
    client = Client(REMOTE_ADDR="203.0.113.7")
    url = reverse("admin:login")
    for _ in range(settings.CALLGATE_LOGIN_FAILURES):
        response = client.post(url, {"username": "root", "password": "wrong", "next": "/admin/"})
        assert response.status_code == 200

    response = client.post(url, {"username": "root", "password": "root-secret-pass-1"})
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
