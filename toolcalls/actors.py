"""Who acts: one value per principal, so each has exactly one name in the audit trail.

``Actor.audit_name`` is ``user:<username>`` for a person, ``service:<API key name>`` for a backend
service calling the REST API with its key, and ``system:<part>`` for Callgate's own processes
(the engine, a worker, the reconciler, the sweeps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

ActorKind = Literal["user", "service", "system"]


class _Named(Protocol):
    def get_username(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Actor:
    kind: ActorKind
    name: str

    @classmethod
    def user(cls, user: _Named) -> Actor:
        """A person acting through the console, the admin or a command."""
        return cls("user", user.get_username())

    @classmethod
    def service(cls, key_name: str) -> Actor:
        """A backend service acting with the API key named ``key_name``."""
        return cls("service", key_name)

    @classmethod
    def system(cls, part: str) -> Actor:
        """Callgate itself: ``part`` names the process or sweep."""
        return cls("system", part)

    @property
    def audit_name(self) -> str:
        return f"{self.kind}:{self.name}"

    def __str__(self) -> str:
        return self.audit_name


#: Callgate's own actors.
ENGINE = Actor.system("engine")
WORKER = Actor.system("worker")
RECONCILER = Actor.system("reconciler")
RECOVERY = Actor.system("recovery")
EXPIRY_SWEEP = Actor.system("expiry-sweep")
RETENTION = Actor.system("retention")
#: Whoever runs a management command (``manage.py`` knows no signed-in person).
COMMAND_LINE = Actor.system("command-line")
