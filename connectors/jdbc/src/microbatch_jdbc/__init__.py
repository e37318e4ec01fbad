"""SQL database connectors for microbatch: ``format("jdbc")`` as a source and as a sink.

The URL is a SQLAlchemy URL (``postgresql+psycopg://user@host/db``, ``sqlite:///file.db``...);
Spark's JDBC option names are accepted. Importing this package does not import SQLAlchemy.
"""

from __future__ import annotations

__all__: list[str] = []
