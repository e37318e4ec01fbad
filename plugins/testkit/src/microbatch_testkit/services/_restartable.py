"""Stopping and starting a test service again on the same address, for the tests of a
connector riding through a broker or database restart."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import ClassVar

__all__ = ["RestartableService"]


class RestartableService:
    """What every service offers around :meth:`start` and :meth:`stop`, which a provider that
    controls its process implements (setting ``can_restart``); the others refuse, naming the
    providers that can."""

    provider: str = "?"
    can_restart: bool = False
    service: ClassVar[str] = "service"
    """What the server is called in messages: ``"Kafka broker"``, ``"PostgreSQL server"``."""
    restartable_with: ClassVar[str] = "MICROBATCH_SERVICES=local"

    @property
    def running(self) -> bool:
        """True unless this provider stopped its server (see :meth:`stop`)."""
        return True

    def start(self) -> None:
        """Start the server (again) on the same address with the same data; wait until ready."""
        raise NotImplementedError(self._no_restart())

    def stop(self, *, graceful: bool = True) -> None:
        """Stop the server, keeping its address and data; ``graceful=False`` kills it
        (``SIGKILL``: a crash)."""
        raise NotImplementedError(self._no_restart())

    def restart(self, *, graceful: bool = True) -> None:
        """Stop and start the server; clients reconnect to the same address."""
        self.stop(graceful=graceful)
        self.start()

    @contextlib.contextmanager
    def stopped(self, *, graceful: bool = True) -> Iterator[None]:
        """Keep the server down inside the ``with`` block; it starts again on the way out."""
        self.stop(graceful=graceful)
        try:
            yield
        finally:
            self.start()

    def ensure_running(self) -> None:
        """Start the server if a test stopped it and did not start it again."""
        if self.can_restart and not self.running:
            self.start()

    def _no_restart(self) -> str:
        kind, _, noun = self.service.rpartition(" ")
        return (
            f"the {self.provider} {kind} provider does not control its {noun}, so it cannot "
            f"stop or restart it; run this test with {self.restartable_with}"
        )
