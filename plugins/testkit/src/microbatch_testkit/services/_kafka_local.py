"""The ``local`` Kafka provider: the Apache Kafka broker itself, run with ``java``.

The broker's jars (``org.apache.kafka:kafka_2.13`` and its runtime dependencies, plus a log4j
backend) come from Maven Central through ``mvn``, once, into the user's cache directory
(``~/.cache/microbatch/kafka-<version>/``). Each test session formats a KRaft storage folder
under the temporary directory and starts one combined broker and controller on two free
loopback ports.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ._kafka import BROKER_SETTINGS, KafkaService
from ._process import ServiceProcess, free_port, log_tail, run_checked

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "LocalKafka",
    "cache_root",
    "cached_kafka_jars",
    "fetch_kafka_jars",
    "find_java",
    "java_problem",
]

DEFAULT_KAFKA_VERSION = "4.4.0"
LOG4J_VERSION = "2.26.1"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
# A small heap; C1 only (the broker is up a second sooner, and test loads are light). Options in
# MICROBATCH_KAFKA_JVM_OPTS come after these and win (-XX:TieredStopAtLevel=4 for full JIT).
JVM_OPTIONS = (
    "-Xms128m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
)
MIN_JAVA = 17

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>microbatch.testkit</groupId>
  <artifactId>kafka-broker-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId>
      <version>{log4j}</version>
    </dependency>
  </dependencies>
</project>
"""

_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <File name="broker" fileName="{log}">
      <PatternLayout pattern="%d{{HH:mm:ss.SSS}} %-5p [%c{{1}}] %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="kafka.request.logger" level="warn"/>
    <Logger name="org.apache.kafka.clients" level="warn"/>
    <Root level="info"><AppenderRef ref="broker"/></Root>
  </Loggers>
</Configuration>
"""

_COMPLETE = "COMPLETE"


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """Where downloads are cached: ``$MICROBATCH_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/microbatch``, else ``~/.cache/microbatch``."""
    env = os.environ if environ is None else environ
    if env.get("MICROBATCH_CACHE_DIR"):
        return Path(env["MICROBATCH_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "microbatch"


def _kafka_home(version: str, environ: Mapping[str, str] | None) -> Path:
    return cache_root(environ) / f"kafka-{version}"


def cached_kafka_jars(version: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder of the broker's jars when a complete download is cached, else None.

    ``$MICROBATCH_KAFKA_HOME`` (an unpacked Kafka distribution) takes precedence: its
    ``libs`` folder is used as it is.
    """
    env = os.environ if environ is None else environ
    if env.get("MICROBATCH_KAFKA_HOME"):
        libs = Path(env["MICROBATCH_KAFKA_HOME"]) / "libs"
        return libs if libs.is_dir() else None
    home = _kafka_home(version, environ)
    return home / "libs" if (home / _COMPLETE).exists() else None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fetch_kafka_jars(
    version: str = DEFAULT_KAFKA_VERSION, environ: Mapping[str, str] | None = None
) -> Path:
    """The folder of the broker's jars, downloading them with ``mvn`` if they are not cached.

    Safe when several processes ask at once (a file lock); a failed download leaves nothing
    behind. Raises ``RuntimeError`` naming what is missing or what Maven said.
    """
    found = cached_kafka_jars(version, environ)
    if found is not None:
        return found
    home = _kafka_home(version, environ)
    with _locked(home.parent / f"kafka-{version}.lock"):
        found = cached_kafka_jars(version, environ)
        if found is not None:
            return found
        mvn = shutil.which("mvn")
        if mvn is None:
            raise RuntimeError(
                f"the Kafka {version} broker's jars are not in {home} and Maven (mvn) is not "
                "on PATH to download them: install Maven, or point MICROBATCH_KAFKA_HOME at "
                "an unpacked Kafka distribution"
            )
        partial = Path(tempfile.mkdtemp(prefix=f"kafka-{version}.partial-", dir=home.parent))
        try:
            (partial / "pom.xml").write_text(_POM.format(kafka=version, log4j=LOG4J_VERSION))
            run_checked(
                [
                    mvn,
                    "--batch-mode",
                    "--quiet",
                    "--file",
                    str(partial / "pom.xml"),
                    f"{DEPENDENCY_PLUGIN}:copy-dependencies",
                    f"-DoutputDirectory={partial / 'libs'}",
                    "-DincludeScope=runtime",
                ],
                what=f"downloading the Kafka {version} broker with Maven",
                log=partial / "mvn.log",
                timeout=900,
            )
            (partial / _COMPLETE).write_text(
                "\n".join(sorted(p.name for p in (partial / "libs").glob("*.jar"))) + "\n"
            )
            if home.exists():
                shutil.rmtree(home)
            os.replace(partial, home)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return home / "libs"


def find_java(environ: Mapping[str, str] | None = None) -> str | None:
    """``$JAVA_HOME/bin/java`` if it exists, else ``java`` on PATH, else None."""
    env = os.environ if environ is None else environ
    if env.get("JAVA_HOME"):
        candidate = Path(env["JAVA_HOME"]) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
    return shutil.which("java", path=env.get("PATH"))


def _java_major(java: str) -> int | None:
    try:
        completed = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', completed.stderr + completed.stdout)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def java_problem(environ: Mapping[str, str] | None = None) -> str | None:
    """What keeps the local broker from running on this Java, or None when Java fits."""
    java = find_java(environ)
    if java is None:
        return f"Java {MIN_JAVA} or newer (no java on PATH and JAVA_HOME is not set)"
    major = _java_major(java)
    if major is None:
        return f"Java {MIN_JAVA} or newer ({java} -version printed no version)"
    if major < MIN_JAVA:
        return f"Java {MIN_JAVA} or newer ({java} is Java {major}; set JAVA_HOME to a newer one)"
    return None


def _cluster_id() -> str:
    """A random KRaft cluster id: 16 random bytes in base64url without padding (22 characters).

    Never one that starts with ``-`` (about 1 draw in 64 would): a command line reads such an
    id as an option. Kafka's own ``Uuid.randomUuid`` skips those ids for the same reason.
    """
    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not candidate.startswith("-"):
            return candidate


def _storage_format_command(
    java_command: Sequence[str], cluster_id: str, config: Path
) -> list[str]:
    """The ``kafka-storage format`` command line for ``cluster_id`` and a server config.

    The id is attached to its option (``--cluster-id=<id>``), so that no id, whatever its
    first character, is read as an option of its own.
    """
    return [
        *java_command,
        "kafka.tools.StorageTool",
        "format",
        f"--cluster-id={cluster_id}",
        "--config",
        str(config),
    ]


class LocalKafka(KafkaService):
    """One Apache Kafka node (broker and KRaft controller in one JVM) on loopback.

    The first :meth:`start` downloads the jars if needed and formats the storage folder;
    later ones (after :meth:`stop`) reuse the same ports and data. :meth:`close` stops the
    JVM and deletes the folder. The broker's log is ``<workdir>/broker.log``.
    """

    provider = "local"
    can_restart = True

    def __init__(
        self,
        *,
        version: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self._environ = dict(os.environ if environ is None else environ)
        self.version = (
            version or self._environ.get("MICROBATCH_KAFKA_VERSION") or DEFAULT_KAFKA_VERSION
        )
        self.workdir: Path | None = None
        self.jar_seconds = 0.0
        self.jars_downloaded = False
        self._process: ServiceProcess | None = None
        self._java: str | None = None
        self._classpath = ""

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.alive()

    @property
    def pid(self) -> int | None:
        """The broker JVM's process id (also its process group), None while stopped."""
        return self._process.pid if self._process is not None else None

    def _prepare(self) -> None:
        problem = java_problem(self._environ)
        if problem is not None:
            raise RuntimeError(f"the local Kafka broker needs {problem}")
        self._java = find_java(self._environ)
        began = time.monotonic()
        self.jars_downloaded = cached_kafka_jars(self.version, self._environ) is None
        libs = fetch_kafka_jars(self.version, self._environ)
        self.jar_seconds = time.monotonic() - began
        self._classpath = str(libs / "*")

        workdir = Path(tempfile.mkdtemp(prefix="microbatch-kafka-"))
        self.workdir = workdir
        port, controller_port = free_port(), free_port()
        while controller_port == port:
            controller_port = free_port()
        self.bootstrap_servers = f"127.0.0.1:{port}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(workdir / "data"),
            **BROKER_SETTINGS,
        }
        (workdir / "server.properties").write_text(
            "".join(f"{key}={value}\n" for key, value in settings.items())
        )
        (workdir / "log4j2.xml").write_text(_LOG4J2.format(log=workdir / "broker.log"))
        run_checked(
            _storage_format_command(
                self._java_command(), _cluster_id(), workdir / "server.properties"
            ),
            what="formatting the Kafka storage folder (kafka-storage format)",
            log=workdir / "format.log",
            timeout=120,
        )
        self.description = f"Apache Kafka {self.version} (local JVM, {workdir})"

    def _java_command(self) -> list[str]:
        assert self._java is not None and self.workdir is not None
        extra = self._environ.get("MICROBATCH_KAFKA_JVM_OPTS", "").split()
        return [
            self._java,
            *JVM_OPTIONS,
            *extra,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.xml'}",
            "-cp",
            self._classpath,
        ]

    def start(self, *, timeout: float = 90.0) -> None:
        if self.running:
            return
        if self.workdir is None:
            self._prepare()
        assert self.workdir is not None
        self._process = ServiceProcess(
            [*self._java_command(), "kafka.Kafka", str(self.workdir / "server.properties")],
            name="kafka",
            log=self.workdir / "stdout.log",
            death_signal="KILL",
        )
        process = self._process
        if not self.wait_ready(timeout=timeout, alive=process.alive):
            state = process.kill_unready(timeout)
            raise RuntimeError(
                f"the local Kafka broker on {self.bootstrap_servers} {state}; end of "
                f"{self.workdir / 'broker.log'}:\n{log_tail(self.workdir / 'broker.log')}\n"
                f"{log_tail(self.workdir / 'stdout.log', 10)}"
            )

    def stop(self, *, graceful: bool = True) -> None:
        self._admin = None
        if self._process is not None:
            self._process.stop(graceful=graceful, timeout=30)
            self._process = None

    def close(self) -> None:
        self.stop()
        super().close()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
