"""Finding connectors: entry points, registration, lookup by format name.

Plugins are loaded explicitly by :meth:`ConnectorRegistry.load_entry_points`, never at import
time. A plugin that fails to import or register is recorded in :attr:`ConnectorRegistry.failures`
with its distribution and version, and the others still load. Environment variables:

- ``MICROBATCH_DISABLE_PLUGIN_AUTOLOAD=1``: load no entry points (register plugins by hand);
- ``MICROBATCH_BLOCK_PLUGINS=name,name``: skip these entry point names.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
from dataclasses import dataclass
from typing import Any, Literal

import pluggy

from . import hookspecs
from .connector import Sink, Source
from .errors import PluginLoadError, UnknownFormatError
from .options import normalize

__all__ = ["ENTRY_POINT_GROUP", "ConnectorInfo", "ConnectorRegistry", "PluginFailure", "Registrar"]

ENTRY_POINT_GROUP = "microbatch.connectors"
Role = Literal["source", "sink"]

# Where first-party formats come from, for the "install ..." hint of an unknown format.
_FIRST_PARTY = {
    "rate": "microbatch-rate",
    "rate-micro-batch": "microbatch-rate",
    "socket": "microbatch-socket",
    "console": "microbatch-console",
    "memory": "microbatch-memory",
    "foreachbatch": "microbatch-foreachbatch",
    "foreach": "microbatch-foreachbatch",
    "noop": "microbatch-foreachbatch",
    "json": "microbatch-file",
    "csv": "microbatch-file",
    "text": "microbatch-file",
    "parquet": "microbatch-file",
    "orc": "microbatch-file",
    "kafka": "microbatch-kafka",
    "delta": "microbatch-delta",
    "jdbc": "microbatch-jdbc",
}


@dataclass(frozen=True)
class ConnectorInfo:
    """One registered connector class and where it came from."""

    format_name: str
    role: Role
    cls: type[Source] | type[Sink]
    plugin: str
    distribution: str
    version: str


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that could not be loaded, and why."""

    plugin: str
    distribution: str
    version: str
    error: str


class Registrar:
    """What a plugin's ``microbatch_register_connectors`` hook is given: the two calls that
    hand its connector classes over, and nothing else of the registry."""

    __slots__ = ("_registry",)

    def __init__(self, registry: ConnectorRegistry) -> None:
        self._registry = registry

    def add_source(self, cls: type[Source]) -> None:
        """Register a source class under its ``format_name``."""
        self._registry.add_source(cls)

    def add_sink(self, cls: type[Sink]) -> None:
        """Register a sink class under its ``format_name``."""
        self._registry.add_sink(cls)


# Class attributes of the first connector contract, with what replaced them.
_OLD_ATTRIBUTES = {
    "replayable": "capabilities = SourceCapabilities(replayable=...)",
    "supports_available_now": "capabilities = SourceCapabilities(available_now=...)",
    "output_modes": "capabilities = SinkCapabilities(output_modes=...)",
    "guarantee": "capabilities = SinkCapabilities(guarantee=...)",
    "needs_checkpoint": "capabilities = SinkCapabilities(needs_checkpoint=...)",
    "supports_partition_by": "capabilities = SinkCapabilities(partition_by=...)",
    "plan": "StreamReader.partitions(start, end)",
    "write": "PartWriter.write(data, part)",
}


def _old_contract(cls: type[Any]) -> list[str]:
    """What ``cls`` still declares of the first contract, each with its replacement."""
    found = []
    for klass in cls.__mro__:
        if klass in (Source, Sink, object) or klass.__module__.startswith("microbatch."):
            continue
        found += [
            f"'{name}' (now {_OLD_ATTRIBUTES[name]})"
            for name in klass.__dict__
            if name in _OLD_ATTRIBUTES
        ]
    return found


class ConnectorRegistry:
    """The connectors known to one ``Session``: sources and sinks keyed by format name."""

    def __init__(self) -> None:
        self.plugin_manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.plugin_manager.add_hookspecs(hookspecs)
        self._connectors: dict[tuple[Role, str], ConnectorInfo] = {}
        self.failures: list[PluginFailure] = []
        self._current: tuple[str, str, str] = ("<unknown>", "<unknown>", "")

    # -- registration -------------------------------------------------------------------
    def add_source(self, cls: type[Source]) -> None:
        """Register a source class under its ``format_name``."""
        self._add("source", cls)

    def add_sink(self, cls: type[Sink]) -> None:
        """Register a sink class under its ``format_name``."""
        self._add("sink", cls)

    def _add(self, role: Role, cls: type[Any]) -> None:
        expected = Source if role == "source" else Sink
        if not (isinstance(cls, type) and issubclass(cls, expected)):
            raise PluginLoadError(f"{cls!r} is not a subclass of microbatch.{expected.__name__}")
        name = cls.format_name
        if not name:
            raise PluginLoadError(f"{cls.__qualname__} has no format_name")
        old = _old_contract(cls)
        if old:
            raise PluginLoadError(
                f"connector '{name}' ({role}, {cls.__qualname__}) is written for the first "
                f"connector contract: it defines {', '.join(old)}. See the connector guide "
                "(docs/writing-a-connector.md) for contract 2"
            )
        undocumented = [option.name for option in cls.options if not option.doc.strip()]
        if undocumented:
            raise PluginLoadError(
                f"connector '{name}' ({role}, {cls.__qualname__}) declares options without a "
                f"doc: {', '.join(repr(option) for option in undocumented)}; give each "
                "Option a doc='...' sentence (it is shown in the option reference)"
            )
        key = (role, normalize(name))
        plugin, distribution, version = self._current
        existing = self._connectors.get(key)
        if existing is not None and existing.cls is not cls:
            raise PluginLoadError(
                f"format '{name}' ({role}) is registered twice: by {existing.distribution} "
                f"{existing.version} ({existing.cls.__qualname__}) and by {distribution} {version} "
                f"({cls.__qualname__}); uninstall one of them"
            )
        self._connectors[key] = ConnectorInfo(name, role, cls, plugin, distribution, version)

    def register_plugin(
        self, plugin: object, name: str, *, distribution: str = "<local>", version: str = ""
    ) -> None:
        """Register a plugin object (a module or instance with hook implementations).

        Failures are recorded in :attr:`failures` rather than raised, so one broken plugin
        never hides the others.
        """
        self._current = (name, distribution, version)
        before = dict(self._connectors)
        try:
            self.plugin_manager.register(plugin, name=name)
            self._call_register(plugin)
        except Exception as error:  # a broken plugin must not break the others
            self._connectors = before  # nor leave half of its connectors behind
            if self.plugin_manager.is_registered(plugin):
                self.plugin_manager.unregister(plugin)
            self.failures.append(PluginFailure(name, distribution, version, _describe(error)))
        finally:
            self._current = ("<unknown>", "<unknown>", "")

    def _call_register(self, plugin: object) -> None:
        caller = self.plugin_manager.subset_hook_caller(
            "microbatch_register_connectors",
            remove_plugins=[p for p in self.plugin_manager.get_plugins() if p is not plugin],
        )
        caller(registry=Registrar(self))

    def load_entry_points(self) -> None:
        """Load every plugin of the ``microbatch.connectors`` entry-point group."""
        if os.environ.get("MICROBATCH_DISABLE_PLUGIN_AUTOLOAD", "").strip() in ("1", "true"):
            return
        blocked = {
            part.strip()
            for part in os.environ.get("MICROBATCH_BLOCK_PLUGINS", "").split(",")
            if part.strip()
        }
        for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            if entry_point.name in blocked or self.plugin_manager.has_plugin(entry_point.name):
                continue
            dist = entry_point.dist
            distribution = dist.metadata["Name"] if dist is not None else "<unknown>"
            version = dist.version if dist is not None else ""
            try:
                plugin = entry_point.load()
            except Exception as error:
                self.failures.append(
                    PluginFailure(entry_point.name, distribution, version, _describe(error))
                )
                continue
            self.register_plugin(
                plugin, entry_point.name, distribution=distribution, version=version
            )
        self.plugin_manager.check_pending()

    # -- lookup -----------------------------------------------------------------------
    def connectors(self) -> list[ConnectorInfo]:
        """Every registered connector, sorted by format name then role."""
        return sorted(self._connectors.values(), key=lambda info: (info.format_name, info.role))

    def find(self, role: Role, format_name: str) -> ConnectorInfo:
        """The connector registered for ``format_name`` in ``role``.

        Raises :class:`UnknownFormatError` listing the installed formats, a close match, the
        distribution to install, and any plugin that failed to load.
        """
        info = self._connectors.get((role, normalize(format_name)))
        if info is not None:
            return info
        raise UnknownFormatError(self._unknown_message(role, format_name))

    def find_any(self, format_name: str) -> list[ConnectorInfo]:
        """Every connector (source, sink or both) registered for ``format_name``.

        Raises :class:`UnknownFormatError` with suggestions from all installed formats.
        """
        key = normalize(format_name)
        found = [info for info in self.connectors() if normalize(info.format_name) == key]
        if found:
            return found
        raise UnknownFormatError(self._unknown_message(None, format_name))

    def _unknown_message(self, role: Role | None, format_name: str) -> str:
        installed = sorted(
            {info.format_name for (r, _), info in self._connectors.items() if role in (None, r)}
        )
        close = difflib.get_close_matches(format_name, installed, n=1, cutoff=0.6)
        kind = f"{role} format" if role else "format"
        lines = [f"Unknown {kind} '{format_name}'."]
        if close:
            lines[0] += f" Did you mean '{close[0]}'?"
        lines.append(f"Installed {kind}s: {', '.join(installed) or 'none'}.")
        other_role = self._other_role(role, format_name)
        distribution = _FIRST_PARTY.get(normalize(format_name).replace("_", "-"))
        if other_role is not None:
            lines.insert(1, other_role)
        elif distribution:
            lines.append(
                f"It is provided by the distribution '{distribution}': pip install {distribution}"
            )
        else:
            lines.append(
                "Install the distribution that provides it (run `microbatch connectors` to see "
                "what is installed)."
            )
        for failure in self.failures:
            lines.append(
                f"Note: plugin '{failure.plugin}' ({failure.distribution} {failure.version}) "
                f"failed to load: {failure.error}"
            )
        return "\n".join(lines)

    def _other_role(self, role: Role | None, format_name: str) -> str | None:
        """The explanation when ``format_name`` is installed, but only in the other role."""
        if role is None:
            return None
        other: Role = "sink" if role == "source" else "source"
        info = self._connectors.get((other, normalize(format_name)))
        if info is None:
            return None
        origin = f"{info.distribution} {info.version}".strip()
        readers, writers = "read_stream or read", "write_stream"
        refused, usable = (readers, writers) if other == "sink" else (writers, readers)
        return (
            f"'{info.format_name}' is installed as a {other} only (distribution {origin}): "
            f"it cannot be used with {refused}, only with {usable}."
        )


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
