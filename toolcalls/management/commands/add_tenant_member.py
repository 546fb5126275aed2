"""``manage.py add_tenant_member --tenant SLUG --username NAME --roles ROLE[,ROLE] [--no-input]``:
make a user (created when new) a member of a tenant with console roles."""

import getpass
import os
import sys
from functools import partial
from typing import Any

from django.core.management.base import CommandError, CommandParser

from toolcalls.actors import COMMAND_LINE
from toolcalls.management.base import CallgateCommand
from toolcalls.services.tenants import (
    ROLES,
    Membership,
    TenantError,
    member_password_check,
    tenant_member_add,
)

#: Where ``--no-input`` reads a new user's password (never from the command line, which other
#: users of the host see and shells keep in their history).
PASSWORD_VARIABLE = "CALLGATE_MEMBER_PASSWORD"
#: Passwords asked for at the terminal before the command gives up.
ATTEMPTS = 3


class Command(CallgateCommand):
    help = (
        "Make a user a member of a tenant with the given console roles ("
        + "; ".join(f"{role.name}: {role.summary}" for role in ROLES.values())
        + "). A new user is created with a password asked for twice at the terminal, or with "
        f"--no-input read from {PASSWORD_VARIABLE}, and checked by the password validators; an "
        "existing user's password is left as it is. Safe to run again: a member with those "
        "roles is reported as 'exists'. A user's roles hold in each of their tenants, so a user "
        "who is a member of another tenant is refused other roles than they have."
    )
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="the tenant's slug")
        parser.add_argument("--username", required=True, help="the name the user signs in with")
        parser.add_argument(
            "--roles",
            required=True,
            help=f"comma-separated, of {', '.join(ROLES)} (exactly the roles the user holds)",
        )
        parser.add_argument(
            "--no-input",
            "--noinput",
            action="store_false",
            dest="interactive",
            help=f"ask nothing: a new user's password is read from {PASSWORD_VARIABLE}",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        add = partial(
            tenant_member_add,
            tenant=self.tenant(options["tenant"]),
            username=username,
            roles=[name.strip() for name in options["roles"].split(",") if name.strip()],
            actor=COMMAND_LINE,
        )
        try:
            membership = add(password=None)
        except TenantError as exc:
            if exc.code != "password_required":
                raise
            membership = add(password=self.password(username, options))
        self.stdout.write(_report(membership))

    def password(self, username: str, options: dict[str, Any]) -> str:
        """The new user's password: from :data:`PASSWORD_VARIABLE` with ``--no-input``, else
        asked for at the terminal."""
        if not options["interactive"]:
            if PASSWORD_VARIABLE not in os.environ:
                message = f"user {username!r} is new: set {PASSWORD_VARIABLE} to their password"
                raise CommandError(message)
            return os.environ[PASSWORD_VARIABLE]
        stdin = options.get("stdin") or sys.stdin
        if stdin is None or not stdin.isatty():
            raise CommandError(
                f"user {username!r} is new and there is no terminal to ask for their password "
                f"on: set {PASSWORD_VARIABLE} and pass --no-input"
            )
        return self.ask(username)

    def ask(self, username: str) -> str:
        """A password typed the same twice that the validators accept, within
        :data:`ATTEMPTS`; each objection is written to stderr before the next attempt."""
        for _ in range(ATTEMPTS):
            try:
                password = getpass.getpass(f"Password for {username}: ")
                again = getpass.getpass("Password (again): ")
            except (KeyboardInterrupt, EOFError):
                raise CommandError("cancelled; nothing changed") from None
            if password != again:
                self.stderr.write("Error: the two passwords differ.")
                continue
            try:
                member_password_check(username=username, password=password)
            except TenantError as exc:
                self.stderr.write(f"Error: {exc.message}")
                continue
            return password
        raise CommandError(f"no password accepted in {ATTEMPTS} attempts; nothing changed")


def _report(membership: Membership) -> str:
    """One line: ``OUTCOME: user USER in TENANT as ROLES``, the roles before when they changed,
    and a warning for an inactive user."""
    user = membership.user.get_username()
    line = f"{membership.outcome}: user {user} in {membership.tenant.slug} as "
    line += ", ".join(membership.roles)
    if membership.outcome != "created" and membership.previous_roles != membership.roles:
        line += f" (before: {', '.join(membership.previous_roles) or 'no role'})"
    if not membership.user.is_active:
        line += "; the user is inactive and cannot sign in"
    return line
