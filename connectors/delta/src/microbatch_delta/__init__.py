"""Delta Lake connectors for microbatch: ``format("delta")`` as a source and as a sink.

Importing this package does not import ``deltalake``: delta-rs loads when a Delta query starts.
"""

from __future__ import annotations

from ._merge import merge_batch

__all__: list[str] = ["merge_batch"]
