"""Which filesystem errors a batch retry may cure, and how they are raised.

A file source or sink on a remote filesystem (s3://, gs://, http://, webhdfs://...) sees the
network fail now and then: a connection reset, a timeout, a server that went away. Running the
batch again (same batch id, same files) usually succeeds, so these errors are raised as
:class:`~microbatch.errors.RetriableError` (the original error is its ``__cause__``) and the
engine retries the batch up to ``maxBatchRetries`` times. Every other error (a missing file, a
malformed record, a full disk, a permission refused) still stops the query.

The errors mapped, when raised while listing, reading, writing or committing (or anywhere in
their ``__cause__`` chain), are :data:`TRANSIENT_ERRORS` and :data:`TRANSIENT_ERROR_NAMES`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from microbatch.errors import RetriableError, cause_chain

__all__ = ["TRANSIENT_ERRORS", "TRANSIENT_ERROR_NAMES", "is_transient", "transient_as_retriable"]

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)
"""Python's own: ``ConnectionError`` (also ``ConnectionResetError``,
``ConnectionRefusedError``, ``ConnectionAbortedError``, ``BrokenPipeError``) and
``TimeoutError`` (also ``socket.timeout``, ``asyncio.TimeoutError`` and fsspec's
``FSTimeoutError``)."""

TRANSIENT_ERROR_NAMES = frozenset(
    {
        # aiohttp (fsspec's http, gcsfs, adlfs): connection lost, server gone, body cut short
        "aiohttp.client_exceptions.ClientConnectionError",
        "aiohttp.client_exceptions.ClientPayloadError",
        # requests (webhdfs and other fsspec filesystems built on it)
        "requests.exceptions.ConnectionError",
        "requests.exceptions.Timeout",
        "requests.exceptions.ChunkedEncodingError",
        # botocore (s3fs): endpoint unreachable, connection closed, connect or read timeout
        "botocore.exceptions.HTTPClientError",
        "botocore.exceptions.ConnectionError",
    }
)
"""Client-library errors, named by module and class so that no client library is imported
to check them (a subclass of one of these counts too)."""


def _transient_class(error: BaseException) -> bool:
    if isinstance(error, TRANSIENT_ERRORS):
        return True
    return any(
        f"{cls.__module__}.{cls.__qualname__}" in TRANSIENT_ERROR_NAMES
        for cls in type(error).__mro__
    )


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` (or an error in its ``__cause__`` chain) is a transient client error."""
    return any(_transient_class(link) for link in cause_chain(error))


@contextmanager
def transient_as_retriable(what: str, *, keep: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """Run the block; a transient error raised in it (not an instance of ``keep``) is raised
    as a :class:`RetriableError` from it, saying that ``what`` (a sentence start naming the file
    or folder) failed; any other error as it is."""
    try:
        yield
    except Exception as error:
        if is_transient(error) and not isinstance(error, keep):
            raise RetriableError(
                f"{what} failed with a transient error ({type(error).__name__}: {error}); the "
                "batch is retried (up to maxBatchRetries times)"
            ) from error
        raise
