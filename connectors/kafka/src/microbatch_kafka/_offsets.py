"""Kafka offsets: the checkpoint's JSON shape, and where a query starts and ends.

Offsets are "the next offset to read" per topic-partition, as Spark keeps them. In the checkpoint
they have Spark's JSON shape ``{"topic": {"0": 23, "1": 45}}``: partition keys are strings,
topics and partitions sorted, so that the same offsets always compare and print the same.

The starting options are parsed when the source is built, without any I/O
(:func:`starting_offsets`, :func:`ending_offsets`); their problems are
:class:`~microbatch.OptionError`\\ s with Spark's texts. They are turned into numbers once the
partitions and their offsets are known (:meth:`StartingOffsets.resolve`,
:func:`resolve_ending`); a mismatch found then is a :class:`~microbatch.SourceError`.

Precedence, as in Spark: ``startingTimestamp`` > ``startingOffsetsByTimestamp`` >
``startingOffsets``. Defaults: ``latest`` for streams, ``earliest`` for batch reads. In offset
JSON, ``-2`` means earliest and ``-1`` latest.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from microbatch import OptionError, Options, SourceError

__all__ = [
    "EARLIEST",
    "LATEST",
    "PartitionOffsets",
    "StartingOffsets",
    "TopicPartition",
    "check_batch_range",
    "describe_tp",
    "describe_tps",
    "ending_offsets",
    "from_json_offset",
    "offset_options",
    "parse_partition_offsets",
    "resolve_ending",
    "starting_offsets",
    "to_json_offset",
]

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]

EARLIEST, LATEST = -2, -1

STARTING_OFFSETS = "startingOffsets"
STARTING_TIMESTAMP = "startingTimestamp"
STARTING_BY_TIMESTAMP = "startingOffsetsByTimestamp"
STARTING_STRATEGY = "startingOffsetsByTimestampStrategy"
ENDING_OFFSETS = "endingOffsets"
# Spark's ending timestamps; refused in streams when the source declares them.
ENDING_TIMESTAMP_OPTIONS = ("endingOffsetsByTimestamp", "endingTimestamp")

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_TIMESTAMPS_EXAMPLE = (
    '{"topicA": {"0": 123456789, "1": 123456789}, "topicB": {"0": 123456789, "1": 123456789}}'
)

Kind = Literal["earliest", "latest", "specific", "timestamp", "by_timestamp"]
Strategy = Literal["error", "latest"]


def describe_tp(tp: TopicPartition) -> str:
    """A topic-partition as Spark (Kafka's ``TopicPartition.toString``) prints it: ``topic-0``."""
    return f"{tp[0]}-{tp[1]}"


def describe_tps(tps: Iterable[TopicPartition]) -> str:
    """Topic-partitions sorted and bracketed, as error texts show a set: ``[t-0, t-1]``."""
    return "[" + ", ".join(describe_tp(tp) for tp in sorted(tps)) + "]"


def to_json_offset(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """Offsets in Spark's JSON shape, topics sorted and partitions sorted numerically."""
    out: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = offsets[(topic, partition)]
    return out


def from_json_offset(offset: Mapping[str, Any]) -> PartitionOffsets:
    """Offsets from Spark's JSON shape (a decoded mapping, as the checkpoint holds it).

    Raises ``ValueError`` naming what is wrong when the shape is not
    ``{"topic": {"<partition>": <int>}}``.
    """
    return _partition_numbers(offset, _OFFSETS_EXAMPLE)


def parse_partition_offsets(value: Any, *, example: str = _OFFSETS_EXAMPLE) -> PartitionOffsets:
    """Per-partition numbers from an option: JSON text or an already decoded mapping.

    Raises ``ValueError`` with Spark's text ``Expected e.g. <example>, got <value>``.
    """
    decoded = value
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"Expected e.g. {example}, got {value}") from None
    try:
        return _partition_numbers(decoded, example)
    except ValueError:
        raise ValueError(f"Expected e.g. {example}, got {_show(value)}") from None


def _partition_numbers(decoded: Any, example: str) -> PartitionOffsets:
    if not isinstance(decoded, Mapping):
        raise ValueError(f"Expected e.g. {example}, got {_show(decoded)}")
    out: PartitionOffsets = {}
    for topic, partitions in decoded.items():
        if not isinstance(topic, str) or not isinstance(partitions, Mapping):
            raise ValueError(f"Expected e.g. {example}, got {_show(decoded)}")
        for key, number in partitions.items():
            partition = _integer(key)
            value = _integer(number)
            if partition is None or partition < 0 or value is None:
                raise ValueError(
                    f"Expected e.g. {example}, got {_show(decoded)}: "
                    f"topic {topic!r} partition {key!r} = {number!r}"
                )
            out[(topic, partition)] = value
    return out


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class StartingOffsets:
    """Where a query with no offsets in its checkpoint starts, as the options say.

    ``kind`` is ``earliest``, ``latest``, ``specific`` (``offsets``: numbers, -2 earliest, -1
    latest), ``timestamp`` (``timestamp``: one epoch-ms for every partition) or
    ``by_timestamp`` (``timestamps``: epoch-ms per partition). ``strategy`` says what a
    timestamp that matches no record means: ``error`` (Spark's default) or ``latest``.

    Made from options without I/O; :meth:`resolve` turns it into numbers once the assigned
    partitions and their earliest/latest offsets (and, for timestamps, the offsets for
    :meth:`timestamps_for`) are known.
    """

    kind: Kind
    offsets: PartitionOffsets = field(default_factory=dict)
    timestamp: int | None = None
    timestamps: PartitionOffsets = field(default_factory=dict)
    strategy: Strategy = "error"

    @property
    def by_time(self) -> bool:
        """True when resolving needs offsets looked up by timestamp."""
        return self.kind in ("timestamp", "by_timestamp")

    def timestamps_for(self, assigned: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        """The timestamps whose offsets :meth:`resolve` needs, per assigned partition.

        ``{}`` unless the start is by timestamp. ``startingOffsetsByTimestamp`` must name exactly
        the assigned partitions: otherwise a :class:`~microbatch.SourceError` with Spark's text.
        """
        if self.kind == "timestamp":
            assert self.timestamp is not None
            return {tp: self.timestamp for tp in sorted(assigned)}
        if self.kind == "by_timestamp":
            _check_timestamps_assigned(self.timestamps, assigned)
            return dict(sorted(self.timestamps.items()))
        return {}

    def resolve(
        self,
        assigned: Collection[TopicPartition],
        earliest: PartitionOffsets,
        latest: PartitionOffsets,
        by_timestamp: Mapping[TopicPartition, int | None],
    ) -> PartitionOffsets:
        """The starting offset of every assigned partition, as Spark resolves it.

        ``earliest``/``latest`` hold the current offsets of the assigned partitions;
        ``by_timestamp`` the offset found for each timestamp of :meth:`timestamps_for`
        (``None`` or -1: no record at or after that time). Raises
        :class:`~microbatch.SourceError`: offsets JSON not naming exactly the assigned
        partitions, or a timestamp with no match under strategy ``error``. A specific offset is
        kept as given, even outside the partition's range: planning reports that
        (``failOnDataLoss``), as Spark does.
        """
        tps = sorted(set(assigned))
        if self.kind == "earliest":
            return {tp: _current(earliest, tp, "earliest") for tp in tps}
        if self.kind == "latest":
            return {tp: _current(latest, tp, "latest") for tp in tps}
        if self.kind == "specific":
            if set(self.offsets) != set(tps):
                raise SourceError(
                    "If startingOffsets contains specific offsets, you must specify all "
                    "TopicPartitions.\nUse -1 for latest, -2 for earliest.\n"
                    f"Specified: {describe_tps(self.offsets)} Assigned: {describe_tps(tps)}"
                )
            return {tp: _specific(self.offsets[tp], tp, earliest, latest) for tp in tps}
        wanted = self.timestamps_for(tps)
        resolved: PartitionOffsets = {}
        for tp in tps:
            found = by_timestamp.get(tp)
            if found is None or found < 0:
                if self.strategy == "error":
                    raise SourceError(
                        f"No offset matched from request of topic-partition {describe_tp(tp)} "
                        f"and timestamp {wanted[tp]}."
                    )
                found = _current(latest, tp, "latest")
            resolved[tp] = found
        return resolved


def _check_timestamps_assigned(
    timestamps: PartitionOffsets, assigned: Collection[TopicPartition]
) -> None:
    if set(timestamps) != set(assigned):
        raise SourceError(
            "Partitions specified for Kafka timestamp based start offsets don't match what are "
            "assigned. Maybe topic partitions are created or deleted while the query is "
            "running, or you didn't specify all the partitions. "
            f"Specified: {describe_tps(timestamps)} Assigned: {describe_tps(assigned)}"
        )


def _current(offsets: PartitionOffsets, tp: TopicPartition, which: str) -> int:
    try:
        return offsets[tp]
    except KeyError:
        raise SourceError(
            f"no {which} offset known for topic-partition {describe_tp(tp)}: it may have been "
            "deleted while the query was starting"
        ) from None


def _specific(
    offset: int, tp: TopicPartition, earliest: PartitionOffsets, latest: PartitionOffsets
) -> int:
    if offset == EARLIEST:
        return _current(earliest, tp, "earliest")
    if offset == LATEST:
        return _current(latest, tp, "latest")
    return offset


def starting_offsets(options: Options, *, streaming: bool) -> StartingOffsets:
    """The parsed starting options (no I/O).

    Raises :class:`~microbatch.OptionError` with Spark's texts: a ``startingTimestamp`` that
    is not a number, offsets JSON that is not ``{"topic":{"0":23}}``, ``latest`` (or -1) in a
    batch read, an unknown ``startingOffsetsByTimestampStrategy``.
    """
    problems: list[str] = []
    start = _starting(options, streaming, problems)
    _raise(problems)
    assert start is not None
    return start


def ending_offsets(options: Options, *, streaming: bool) -> Literal["latest"] | PartitionOffsets:
    """Where a batch read ends: ``"latest"`` or per-partition offsets (-1 = latest).

    ``endingOffsets`` is for batch reads only; in a stream it is an
    :class:`~microbatch.OptionError` (``ending offset not valid in streaming queries``), as
    are ``earliest`` (or -2) in it, and offsets JSON whose partitions differ from those of
    ``startingOffsets`` or that end before they start. A stream gets ``"latest"``.
    """
    problems: list[str] = []
    start = _starting(options, streaming, []) if not streaming else None
    end = _ending(options, streaming, start, problems)
    _raise(problems)
    return end


def offset_options(
    options: Options, *, streaming: bool
) -> tuple[StartingOffsets, Literal["latest"] | PartitionOffsets]:
    """:func:`starting_offsets` and :func:`ending_offsets` at once, every problem in one
    :class:`~microbatch.OptionError`."""
    problems: list[str] = []
    start = _starting(options, streaming, problems)
    end = _ending(options, streaming, start, problems)
    _raise(problems)
    assert start is not None
    return start, end


def _raise(problems: list[str]) -> None:
    if problems:
        listing = "\n".join(f"  - {problem}" for problem in problems)
        raise OptionError(f"Invalid options for 'kafka':\n{listing}", problems)


def _given(options: Options, name: str) -> Any:
    """The value the user gave for ``name``, or ``None`` (not given, or not declared)."""
    if options.spec.get(name) is None or not options.is_set(name):
        return None
    return options[name]


def _strategy(options: Options, problems: list[str]) -> Strategy:
    value = _given(options, STARTING_STRATEGY)
    if value is None:
        return "error"
    text = str(value).strip().lower()
    if text not in ("error", "latest"):
        problems.append(f"{STARTING_STRATEGY} must be 'error' or 'latest', got {value!r}")
        return "error"
    return "error" if text == "error" else "latest"


def _starting(options: Options, streaming: bool, problems: list[str]) -> StartingOffsets | None:
    strategy = _strategy(options, problems)
    timestamp = _given(options, STARTING_TIMESTAMP)
    if timestamp is not None:
        number = None if isinstance(timestamp, bool) else _integer(timestamp)
        if number is None:
            shown = timestamp.strip() if isinstance(timestamp, str) else timestamp
            problems.append(f"Expected a single long value, got {shown}")
            return None
        return StartingOffsets("timestamp", timestamp=number, strategy=strategy)
    by_timestamp = _given(options, STARTING_BY_TIMESTAMP)
    if by_timestamp is not None:
        try:
            stamps = parse_partition_offsets(_trim(by_timestamp), example=_TIMESTAMPS_EXAMPLE)
        except ValueError as error:
            problems.append(str(error))
            return None
        return StartingOffsets("by_timestamp", timestamps=stamps, strategy=strategy)
    value = _given(options, STARTING_OFFSETS)
    if value is None:
        return StartingOffsets("latest" if streaming else "earliest", strategy=strategy)
    text = _trim(value)
    if isinstance(text, str) and text.lower() in ("earliest", "latest"):
        if text.lower() == "latest" and not streaming:
            problems.append("starting offset can't be latest for batch queries on Kafka")
            return None
        return StartingOffsets("earliest" if text.lower() == "earliest" else "latest")
    try:
        offsets = parse_partition_offsets(text)
    except ValueError as error:
        problems.append(str(error))
        return None
    bad = _bad_values(offsets, STARTING_OFFSETS)
    if not streaming:
        bad += [
            f"startingOffsets for {describe_tp(tp)} can't be latest for batch queries on Kafka"
            for tp, offset in sorted(offsets.items())
            if offset == LATEST
        ]
    if bad:
        problems.extend(bad)
        return None
    return StartingOffsets("specific", offsets=offsets, strategy=strategy)


def _ending(
    options: Options,
    streaming: bool,
    start: StartingOffsets | None,
    problems: list[str],
) -> Literal["latest"] | PartitionOffsets:
    value = _given(options, ENDING_OFFSETS)
    if streaming:
        if value is not None:
            problems.append("ending offset not valid in streaming queries")
        if any(_given(options, name) is not None for name in ENDING_TIMESTAMP_OPTIONS):
            problems.append("ending timestamp not valid in streaming queries")
        return "latest"
    if value is None:
        return "latest"
    text = _trim(value)
    if isinstance(text, str) and text.lower() in ("earliest", "latest"):
        if text.lower() == "earliest":
            problems.append("ending offset can't be earliest for batch queries on Kafka")
        return "latest"
    try:
        offsets = parse_partition_offsets(text)
    except ValueError as error:
        problems.append(str(error))
        return "latest"
    bad = _bad_values(offsets, ENDING_OFFSETS)
    bad += [
        f"ending offset for {describe_tp(tp)} can't be earliest for batch queries on Kafka"
        for tp, offset in sorted(offsets.items())
        if offset == EARLIEST
    ]
    if start is not None and start.kind == "specific" and not bad:
        bad += _unresolved_range_problems(start.offsets, offsets)
    if bad:
        problems.extend(bad)
        return "latest"
    return offsets


def _bad_values(offsets: PartitionOffsets, option: str) -> list[str]:
    return [
        f"{option} for {describe_tp(tp)} is {offset}: use an offset of 0 or more, "
        "-1 for latest or -2 for earliest"
        for tp, offset in sorted(offsets.items())
        if offset < EARLIEST
    ]


def _unresolved_range_problems(start: PartitionOffsets, end: PartitionOffsets) -> list[str]:
    if set(start) != set(end):
        return [
            "The specified start offset and end offset should have the same topic-partitions. "
            f"Topic-partitions for start offset: {describe_tps(start)}, "
            f"topic-partitions for end offset: {describe_tps(end)}."
        ]
    return [
        f"The specified start offset {start[tp]} is greater than the end offset {end[tp]} "
        f"for topic {tp[0]} partition {tp[1]}."
        for tp in sorted(start)
        if start[tp] >= 0 and end[tp] >= 0 and start[tp] > end[tp]
    ]


def _trim(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def resolve_ending(
    ending: Literal["latest"] | PartitionOffsets,
    assigned: Collection[TopicPartition],
    latest: PartitionOffsets,
) -> PartitionOffsets:
    """The end of a batch read as numbers: ``"latest"`` and -1 become the latest offsets.

    Offsets JSON must name exactly the assigned partitions (a
    :class:`~microbatch.SourceError` otherwise, in Spark's words).
    """
    tps = sorted(set(assigned))
    if ending == "latest":
        return {tp: _current(latest, tp, "latest") for tp in tps}
    if set(ending) != set(tps):
        raise SourceError(
            "If endingOffsets contains specific offsets, you must specify all "
            "TopicPartitions.\nUse -1 for latest.\n"
            f"Specified: {describe_tps(ending)} Assigned: {describe_tps(tps)}"
        )
    return {
        tp: _current(latest, tp, "latest") if ending[tp] == LATEST else ending[tp] for tp in tps
    }


def check_batch_range(start: PartitionOffsets, end: PartitionOffsets) -> None:
    """Spark's check of a batch read's resolved offsets: same partitions, start ≤ end.

    Raises :class:`~microbatch.SourceError` with Spark's texts.
    """
    if set(start) != set(end):
        raise SourceError(
            "The specified start offset and end offset should have the same topic-partitions. "
            f"Topic-partitions for start offset: {describe_tps(start)}, "
            f"topic-partitions for end offset: {describe_tps(end)}."
        )
    for tp in sorted(start):
        if start[tp] > end[tp]:
            raise SourceError(
                f"The resolved start offset {start[tp]} is greater than the resolved end offset "
                f"{end[tp]} for topic {tp[0]} partition {tp[1]}. There may be multiple reasons: "
                "1. Start offset is set to too big a value that after resolution, end offset is "
                "smaller than it. There are multiple input cases: (a) Start offset is set to a "
                "timestamp, and the end offset is set to an index. (b) Start offset is set to an "
                "index, and the end offset is set to a timestamp. (c) Start offset is set, and "
                "the end offset is set to latest. 2. The Kafka topic partition is broken."
            )
