"""The ``local`` PostgreSQL provider: a throwaway cluster from the installed server binaries.

``initdb`` writes a cluster into a new folder under ``/tmp`` (trust authentication, no
fsync), and ``postgres`` serves it on a free loopback port with its socket in the same
folder. ``initdb`` refuses to run as root, so when the tests run as root both run as the
``postgres`` user (or ``nobody`` when there is none).
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import shutil
import signal
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ._postgres import PostgresService
from ._process import ServiceProcess, free_port, log_tail, run_checked, wait_until

__all__ = ["LocalPostgres", "find_postgres_bin", "postgres_problem"]

# fsync off: nothing waits for the disk, yet a server killed with SIGKILL (see
# LocalPostgres.stop) keeps every acknowledged commit, because synchronous_commit stays on and
# a commit returns once its WAL is in the kernel's page cache.
_SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "fsync": "off",
    "synchronous_commit": "on",
    "full_page_writes": "off",
    "max_connections": "200",
}


def _version_key(path: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path))


def find_postgres_bin(environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder holding ``initdb``, ``postgres`` and ``pg_ctl``, or None.

    Looks at ``$MICROBATCH_POSTGRES_BIN``, then ``initdb`` on PATH, then the newest of
    Debian's ``/usr/lib/postgresql/*/bin`` and RPM's ``/usr/pgsql-*/bin``.
    """
    env = os.environ if environ is None else environ

    def complete(folder: Path) -> bool:
        return all((folder / tool).is_file() for tool in ("initdb", "postgres"))

    if env.get("MICROBATCH_POSTGRES_BIN"):
        folder = Path(env["MICROBATCH_POSTGRES_BIN"])
        return folder if complete(folder) else None
    on_path = shutil.which("initdb", path=env.get("PATH"))
    if on_path is not None and complete(Path(on_path).resolve().parent):
        return Path(on_path).resolve().parent
    candidates = glob.glob("/usr/lib/postgresql/*/bin") + glob.glob("/usr/pgsql-*/bin")
    for candidate in sorted(candidates, key=_version_key, reverse=True):
        if complete(Path(candidate)):
            return Path(candidate)
    return None


def postgres_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """What the local provider is missing, or None."""
    env = os.environ if environ is None else environ
    if find_postgres_bin(env) is None:
        where = (
            f"not in MICROBATCH_POSTGRES_BIN={env['MICROBATCH_POSTGRES_BIN']}"
            if env.get("MICROBATCH_POSTGRES_BIN")
            else "initdb is not on PATH nor in /usr/lib/postgresql/*/bin"
        )
        return (
            f"the PostgreSQL server binaries initdb and postgres ({where}; on Debian or "
            "Ubuntu: apt-get install postgresql)"
        )
    return None


def _server_user() -> str | None:
    """The user to run the server as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError(
        "the tests run as root, initdb refuses to, and there is neither a 'postgres' nor a "
        "'nobody' user to run it as: create an unprivileged user named postgres"
    )


class LocalPostgres(PostgresService):
    """A PostgreSQL cluster of its own, started by :meth:`start` and deleted by :meth:`close`.

    The superuser is ``postgres`` without a password (trust on loopback); the server log is
    ``<workdir>/postgres.log``.
    """

    provider = "local"

    def __init__(self, *, environ: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self._environ = dict(os.environ if environ is None else environ)
        self.workdir: Path | None = None
        self.version = ""
        self._process: ServiceProcess | None = None
        self._bindir: Path | None = None
        self._user: str | None = None
        self._port = 0

    @property
    def pid(self) -> int | None:
        """The postmaster's process id (also its process group), None when not running."""
        return self._process.pid if self._process is not None else None

    can_restart = True

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.alive()

    def start(self, *, timeout: float = 60.0) -> None:
        """Start the server, creating the cluster the first time; returns once it accepts
        connections. After :meth:`stop` it serves the same data on the same port."""
        if self.running:
            return
        if self.workdir is None:
            self._create_cluster()
        assert self.workdir is not None and self._bindir is not None
        workdir, port = self.workdir, self._port
        log = workdir / "postgres.log"  # opened here and inherited: no permission needed
        settings = [f"--{key}={value}" for key, value in _SERVER_SETTINGS.items()]
        self._process = ServiceProcess(
            [
                str(self._bindir / "postgres"),
                "-D",
                str(workdir / "data"),
                "-p",
                str(port),
                "-k",
                str(workdir),
                *settings,
            ],
            name="postgres",
            log=log,
            user=self._user,
            stop_signal=signal.SIGINT,  # fast shutdown: ends open sessions
            death_signal="INT",
        )
        process = self._process
        if not wait_until(
            self.accepts_connections, timeout=timeout, alive=process.alive, interval=0.05
        ):
            state = process.kill_unready(timeout)
            self._process = None
            raise RuntimeError(
                f"the local PostgreSQL server on port {port} {state}; end of {log}:\n"
                f"{log_tail(log)}"
            )

    def stop(self, *, graceful: bool = True) -> None:
        """Stop the server, keeping its data folder and port: ``graceful`` is PostgreSQL's
        fast shutdown (open sessions end with an error), ``graceful=False`` kills the server
        with ``SIGKILL`` (crash recovery runs on the next :meth:`start`)."""
        if self._process is not None:
            self._process.stop(graceful=graceful, timeout=20)
            self._process = None

    def _create_cluster(self) -> None:
        bindir = find_postgres_bin(self._environ)
        if bindir is None:
            raise RuntimeError(
                f"the local PostgreSQL provider needs {postgres_problem(self._environ)}"
            )
        user = _server_user()
        # Under /tmp rather than $TMPDIR: the server user must reach it, and the socket path
        # must stay short.
        workdir = Path(tempfile.mkdtemp(prefix="microbatch-pg-", dir="/tmp"))
        self.workdir = workdir
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(workdir, entry.pw_uid, entry.pw_gid)
        run_checked(
            [
                str(bindir / "initdb"),
                "--pgdata",
                str(workdir / "data"),
                "--username",
                "postgres",
                "--auth",
                "trust",
                "--encoding",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
            what="initdb",
            log=workdir / "initdb.log",
            user=user,
            timeout=120,
        )
        self.version = (workdir / "data" / "PG_VERSION").read_text().strip()
        self._bindir, self._user, self._port = bindir, user, free_port()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self._port}/postgres"
        self.description = f"PostgreSQL {self.version} (local, {bindir}, {workdir})"

    def close(self) -> None:
        self.stop()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
