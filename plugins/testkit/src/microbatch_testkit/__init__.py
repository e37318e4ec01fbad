"""Conformance tests for microbatch connectors.

Subclass :class:`SourceContract` or :class:`SinkContract` in your own test module, point it
at your connector class, and pytest runs every check that your connector's declared
capabilities call for::

    from microbatch_testkit import SinkContract

    class TestMySinkContract(SinkContract):
        sink_class = MySink
        ...

:mod:`microbatch_testkit.data` holds the edge-case input tables; :mod:`microbatch_testkit.crash`
kills a pipeline at a chosen step to prove recovery; :func:`read_elsewhere` and
:func:`write_batch_elsewhere` read a range's splits and write a batch's parts in other processes
from pickled objects, for a connector's own checks of exact rows. Installing the kit also
provides the pytest fixtures ``memory_state``, ``state_store``, ``wide`` and ``row_of`` (see
:mod:`microbatch_testkit.pytest_plugin`).
"""

from __future__ import annotations

from . import crash, data
from ._processes import read_elsewhere, write_batch_elsewhere
from .batch_source import BatchSourceContract
from .sink import SinkContract
from .source import SourceContract

__version__ = "0.1.0"

__all__ = [
    "BatchSourceContract",
    "SinkContract",
    "SourceContract",
    "crash",
    "data",
    "read_elsewhere",
    "write_batch_elsewhere",
]
