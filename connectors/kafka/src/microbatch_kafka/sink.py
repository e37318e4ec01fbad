"""The ``kafka`` sink: Spark's Kafka writer, at least once, or exactly once with transactions.

At least once (the default), each part writer produces its rows directly, waits for their
delivery reports and fails the batch on the first failed one; ``commit`` has nothing left to
do. With ``exactlyOnce=true`` the part writers only select the columns, and ``commit`` writes
the whole batch in one Kafka transaction together with the batch's marker (see
``_transactions``). ``confluent_kafka`` is imported only when a query starts (its client
checks the ``kafka.*`` settings) or a batch is written, never with the plugin.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from microbatch import (
    CommitMessage,
    Guarantee,
    OutputMode,
    PartContext,
    PartWriter,
    Sink,
    SinkCapabilities,
    SinkError,
    StreamWriter,
    TableMessage,
    WriteContext,
)

from ._client_config import client_settings
from ._sink_options import SINK_OPTIONS
from ._sink_schema import NULL_TOPIC, Layout, check_columns

__all__ = ["KafkaPartWriter", "KafkaSink", "KafkaStreamWriter", "Produced"]


class KafkaSink(Sink):
    """``format("kafka")`` as a sink: the rows' ``value`` (and ``key``, ``topic``,
    ``partition``, ``headers``) become Kafka records, as Spark's Kafka writer makes them."""

    format_name = "kafka"
    description = "records into Kafka topics (at least once; exactlyOnce=true: transactions)"
    options = SINK_OPTIONS
    capabilities = SinkCapabilities(
        output_modes=frozenset({OutputMode.APPEND, OutputMode.UPDATE, OutputMode.COMPLETE}),
        guarantee=Guarantee.AT_LEAST_ONCE,
    )

    def describe(self) -> str:
        topic = self.opts.topic
        mode = ", exactlyOnce" if self.opts.exactly_once else ""
        return f"KafkaSink[{'topic=' + topic if topic else 'topic column'}{mode}]"

    def stream_writer(self, context: WriteContext) -> StreamWriter:
        # Spark checks the columns when the query starts: no broker is asked here.
        layout = check_columns(context.schema, self.opts.topic)
        settings = client_settings(self.opts)
        self._check_settings(settings)
        if not self.opts.exactly_once:
            return KafkaStreamWriter(settings, layout)
        return ExactlyOnceStreamWriter(
            settings,
            layout,
            layout.schema_of(context.schema),
            context,
            prefix=self.opts.transactional_id_prefix,
            marker_topic=self.opts.exactly_once_marker_topic or self.opts.topic,
            unknown_batch=self.opts.exactly_once_unknown_batch,
            timeout=self.opts.exactly_once_timeout.total_seconds(),
        )

    def _check_settings(self, settings: Mapping[str, Any]) -> None:
        """The Kafka client's own checks of the ``kafka.*`` settings, now rather than at the
        first batch (a client made without a broker address, closed at once)."""
        from ._producing import check_settings, producer_settings

        if self.opts.exactly_once:
            from ._transactions import transactional_config

            config = transactional_config(settings, "microbatch-check")
        else:
            config = producer_settings(settings)
        check_settings(config, settings, self.opts.secret_values())


@dataclass(frozen=True)
class Produced(CommitMessage):
    """What an at-least-once part writer delivered."""

    records: int


class KafkaPartWriter(PartWriter):
    """Produces one part with its thread's producer of the run and waits for its delivery
    reports. Picklable: holds the settings, the column layout and the run's name only; the
    producers live in the process (closed by the stream writer's ``stop()`` in the query's
    process, at exit in another one)."""

    def __init__(self, settings: Mapping[str, Any], layout: Layout, run: str | None = None) -> None:
        self.settings = dict(settings)
        self.layout = layout
        self.run = run or uuid.uuid4().hex

    def __repr__(self) -> str:  # the settings may hold secrets
        return f"KafkaPartWriter(columns={self.layout.columns})"

    def write(self, data: pa.RecordBatchReader, part: PartContext) -> Produced:
        from ._producing import (
            Delivery,
            flush_and_check,
            is_fatal,
            produce_batch,
            producer_settings,
            run_producers,
        )

        settings = producer_settings(self.settings)
        producers = run_producers(self.run, settings)
        producer = producers.get()
        delivery = Delivery(f"batch {part.batch_id} (part {part.part_index})")
        records = 0
        try:
            for batch in data:
                records += produce_batch(
                    producer, self.layout.normalise(batch), self.layout, delivery, settings
                )
            flush_and_check(producer, delivery, settings)
        except SinkError as error:
            if is_fatal(error):  # the handle is dead: the retry gets a new one
                producers.forget()
            raise
        return Produced(records)


class KafkaStreamWriter(StreamWriter):
    """At least once: the parts are delivered when they return; ``commit`` is a no-op.
    Owns the producers its part writers make in this process, and closes them in
    :meth:`stop`."""

    def __init__(self, settings: Mapping[str, Any], layout: Layout) -> None:
        self._part_writer = KafkaPartWriter(settings, layout)

    def part_writer(self) -> PartWriter:
        return self._part_writer

    def commit(self, messages: Sequence[CommitMessage | None], batch_id: int) -> None:
        return None

    def stop(self) -> None:
        from ._producing import close_run

        close_run(self._part_writer.run)


class SelectingPartWriter(PartWriter):
    """Exactly once: keeps a part's sink columns in memory for the batch's transaction."""

    def __init__(self, layout: Layout, schema: pa.Schema) -> None:
        self.layout = layout
        self.schema = schema

    def write(self, data: pa.RecordBatchReader, part: PartContext) -> TableMessage:
        batches = [self.layout.normalise(batch) for batch in data]
        table = pa.Table.from_batches(batches, schema=self.schema)
        if self.layout.topic and table.column("topic").null_count:
            raise SinkError(NULL_TOPIC)
        return TableMessage(table)


class ExactlyOnceStreamWriter(StreamWriter):
    """Exactly once: ``commit`` writes the batch and its marker in one Kafka transaction.

    The transactional producer is made in the first ``commit`` (and again in a forked
    process), never here: a writer built only to look, or in a parent process, must not
    fence the one that writes.
    """

    def __init__(
        self,
        settings: Mapping[str, Any],
        layout: Layout,
        schema: pa.Schema,
        context: WriteContext,
        *,
        prefix: str,
        marker_topic: str,
        unknown_batch: str,
        timeout: float,
    ) -> None:
        self._settings = dict(settings)
        self._layout = layout
        self._schema = schema
        self._context = context
        self._prefix = prefix
        self._marker_topic = marker_topic
        self._unknown_batch = unknown_batch
        self._timeout = timeout
        self._transactions: Any = None

    def __repr__(self) -> str:
        return f"ExactlyOnceStreamWriter(transactional.id={self.transactional_id!r})"

    @property
    def transactional_id(self) -> str:
        return f"{self._prefix}-{self._context.query_id}"

    def part_writer(self) -> PartWriter:
        return SelectingPartWriter(self._layout, self._schema)

    def _ensure(self) -> Any:
        if self._transactions is None:
            from ._transactions import Transactions

            self._transactions = Transactions(
                self._settings,
                transactional_id=self.transactional_id,
                marker_topic=self._marker_topic,
                query_id=self._context.query_id,
                state=self._context.state,
                last_committed_batch_id=self._context.last_committed_batch_id,
                unknown_batch=self._unknown_batch,
                timeout=self._timeout,
            )
        return self._transactions

    def commit(self, messages: Sequence[CommitMessage | None], batch_id: int) -> None:
        tables = [message.table for message in messages if isinstance(message, TableMessage)]
        self._ensure().commit(tables, self._layout, batch_id)

    def abort(self, messages: Sequence[CommitMessage | None], batch_id: int) -> None:
        if self._transactions is not None:
            self._transactions.abort_open()

    def stop(self) -> None:
        if self._transactions is not None:
            self._transactions.close()
