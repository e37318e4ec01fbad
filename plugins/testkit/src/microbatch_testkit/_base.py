"""What the source and sink contracts share: per-test setup, option checks, collection rules."""

from __future__ import annotations

import contextlib
import importlib.metadata
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, TypeVar

import pytest

from microbatch import (
    OptionError,
    OptionSpec,
    Session,
    Sink,
    SinkCapabilities,
    Source,
    SourceCapabilities,
    StateStore,
)

from ._compare import show

__all__ = ["ContractBase"]

UNKNOWN_OPTION = "definitelyNotAnOption"


_Connector = TypeVar("_Connector", Source, Sink)
_Capabilities = TypeVar("_Capabilities", SourceCapabilities, SinkCapabilities)
_Made = TypeVar("_Made")


def checked_type(owner: object, method: str, made: _Made, expected: type) -> _Made:
    """``made``, which ``owner.method()`` returned, checked to be a microbatch ``expected``."""
    assert isinstance(made, expected), (
        f"{type(owner).__qualname__}.{method}() returned {type(made).__name__}, "
        f"not a microbatch.{expected.__name__}"
    )
    return made


def check_picklable(value: object, what: str) -> None:
    """Fail the test, naming ``what`` and the pickling error, when ``value`` cannot be pickled."""
    try:
        pickle.dumps(value)
    except Exception as error:
        pytest.fail(f"{what} cannot be pickled ({type(error).__name__}: {error}): {value!r}")


class ContractBase(Generic[_Connector, _Capabilities]):
    """Base of the contract suites. Subclasses are collected by pytest; this class is not.

    A suite of one role sets ``_role`` (``"source"`` or ``"sink"``: the connector class is its
    ``<role>_class`` attribute) and ``_capabilities_class``.

    Per test, ``self.tmp_path`` is a fresh folder and ``self.state`` a fresh
    :class:`~microbatch.StateStore` inside it; both are set before any hook is called.
    ``self.built`` lists the stream readers or writers the test built so far (all stopped at its
    end); ``self.query_id`` is the query id their contexts carry.
    """

    __test__ = False
    _role: ClassVar[Literal["source", "sink"]]
    _capabilities_class: ClassVar[type[Any]]
    tmp_path: Path
    state: StateStore
    built: list[Any]
    query_id: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__test__" not in cls.__dict__:
            cls.__test__ = True

    # -- hooks ----------------------------------------------------------------------------
    def make_options(self) -> dict[str, Any]:
        """Valid raw options for the connector, as a user would pass them to ``.option()``.

        Called for every instance a test builds; within one test, return options that name
        the same data each time.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement make_options()")

    def make_session(self) -> Any:
        """The ``session`` placed in the connector's context (once per test); default None."""
        return None

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        """Raw options that must be rejected, each with a substring the error must contain."""
        return []

    # -- helpers --------------------------------------------------------------------------
    @pytest.fixture(autouse=True)
    def _microbatch_contract_setup(self, tmp_path: Path) -> Iterator[None]:
        self.tmp_path = tmp_path
        self.state = StateStore(str(tmp_path / "state"))
        self._session_made = False
        self._session: Any = None
        self.built = []
        self.query_id = "microbatch-testkit-query"
        self._made: list[tuple[Any, Any]] = []
        yield
        for connector in reversed(self.built):
            # test_stop_is_idempotent reports stop() failures; teardown stays quiet
            with contextlib.suppress(Exception):
                connector.stop()

    def _keep(self, built: Any, made: Any) -> None:
        """Add ``built`` (a stream reader or writer) to :attr:`built`, with the record of what
        it was made from that :meth:`_made_of` gives back."""
        self._made.append((built, made))
        self.built.append(built)

    def _made_of(self, built: object) -> Any:
        """The record :meth:`_keep` kept with ``built``."""
        for candidate, made in self._made:
            if candidate is built:
                return made
        raise LookupError(f"{built!r} was not made by build()")

    @property
    def session(self) -> Any:
        """The session of the running test, made by :meth:`make_session` on first use."""
        if not self._session_made:
            self._session = self.make_session()
            self._session_made = True
        return self._session

    def _connector_class(self) -> type[_Connector]:
        """The class the suite's ``<role>_class`` attribute names; the test fails without it."""
        attribute = f"{self._role}_class"
        cls = getattr(self, attribute, None)
        if cls is None:
            pytest.fail(f"{type(self).__name__} must set {attribute}")
        return cls

    def _capabilities(self) -> _Capabilities:
        """The connector class's ``capabilities``, asserted to be the role's declaration."""
        cls = self._connector_class()
        capabilities: Any = cls.capabilities
        expected = self._capabilities_class
        assert isinstance(capabilities, expected), (
            f"{cls.__qualname__}.capabilities is {capabilities!r}, not a "
            f"microbatch.{expected.__name__}"
        )
        return capabilities

    def _spec(self) -> OptionSpec:
        spec: OptionSpec = self._connector_class().options
        return spec

    def _build_any(self, options: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _parse(self, raw: dict[str, Any]) -> Any:
        cls = self._connector_class()
        return cls.options.parse(raw, connector=cls.format_name)

    # -- tests shared by sources and sinks ------------------------------------------------
    def test_bad_options_are_rejected(self) -> None:
        cases = self.bad_options()
        if not cases:
            pytest.skip("bad_options() returns no cases")
        for raw, expected in cases:
            try:
                self._build_any(raw)
            except OptionError as error:
                assert expected in str(error), (
                    f"options {show(raw)} were rejected, but the message does not contain "
                    f"{expected!r}:\n{error}"
                )
            else:
                pytest.fail(
                    f"options {show(raw)} were accepted; expected an OptionError "
                    f"containing {expected!r}"
                )

    def test_unknown_option_is_rejected(self) -> None:
        spec = self._spec()
        raw = {**self.make_options(), UNKNOWN_OPTION: "1"}
        with pytest.raises(OptionError) as caught:
            self._build_any(raw)
        message = str(caught.value)
        assert UNKNOWN_OPTION in message, f"the error does not name the unknown option:\n{message}"
        missing = [option.name for option in spec if option.name not in message]
        assert not missing, f"the error does not list the known options {missing}:\n{message}"
        typo = _typo_of(spec)
        if typo is not None:
            wrong, meant = typo
            with pytest.raises(OptionError) as caught:
                self._build_any({**self.make_options(), wrong: "1"})
            assert f"did you mean '{meant}'" in str(caught.value), (
                f"option {wrong!r} was rejected without suggesting {meant!r}:\n{caught.value}"
            )

    def test_every_option_is_documented(self) -> None:
        cls = self._connector_class()
        assert cls.format_name, f"{cls.__qualname__} has no format_name"
        undocumented = [option.name for option in cls.options if not option.doc.strip()]
        assert not undocumented, f"{cls.__qualname__} options without a doc string: {undocumented}"

    def test_installed_distribution_registers_the_class(self) -> None:
        cls = self._connector_class()
        distributions = _distributions_of(cls)
        if not distributions:
            pytest.skip(f"{cls.__module__} is not part of an installed distribution")
        registry = Session().registry
        failures = [f for f in registry.failures if f.distribution in distributions]
        assert not failures, f"the plugin of {distributions[0]} failed to load: {failures}"
        info = registry.find(self._role, cls.format_name)
        assert info.cls is cls, (
            f"{self._role} format '{cls.format_name}' is registered as {info.cls.__qualname__} "
            f"({info.distribution}), not {cls.__qualname__}"
        )
        assert info.distribution in distributions, (
            f"{self._role} format '{cls.format_name}' is registered by {info.distribution}, "
            f"not by {distributions[0]}"
        )
        assert info.version == importlib.metadata.version(info.distribution), (
            f"{self._role} format '{cls.format_name}' is registered with version "
            f"{info.version!r}, not the installed {importlib.metadata.version(info.distribution)!r}"
        )


def _distributions_of(cls: type[Any]) -> list[str]:
    """The installed distributions that hold the top-level package of ``cls``'s module."""
    top = cls.__module__.partition(".")[0]
    return list(dict.fromkeys(importlib.metadata.packages_distributions().get(top, [])))


def _typo_of(spec: OptionSpec) -> tuple[str, str] | None:
    """A misspelling of a declared option that no other option or prefix claims."""
    for option in sorted(spec, key=lambda option: len(option.name), reverse=True):
        if len(option.name) < 5:
            continue
        wrong = option.name[:-1]
        if spec.get(wrong) is not None:
            continue
        if any(wrong.lower().startswith(prefix.lower()) for prefix in spec.prefixes):
            continue
        return wrong, option.name
    return None
