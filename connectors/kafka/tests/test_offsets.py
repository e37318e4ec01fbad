"""Offset JSON and the starting/ending options of the Kafka source (no broker)."""

from __future__ import annotations

from typing import Any

import pytest

from microbatch import Option, OptionError, OptionSpec, SourceError
from microbatch_kafka._offsets import (
    StartingOffsets,
    check_batch_range,
    describe_tp,
    ending_offsets,
    from_json_offset,
    offset_options,
    resolve_ending,
    starting_offsets,
    to_json_offset,
)
from microbatch_kafka._source_options import SOURCE_OPTIONS

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)
ASSIGNED = (A0, A1, B0)
EARLIEST = {A0: 5, A1: 0, B0: 2}
LATEST = {A0: 50, A1: 40, B0: 30}


def opts(**given: Any):
    raw = {"subscribe": "a,b", "kafka.bootstrap.servers": "localhost:9092", **given}
    return SOURCE_OPTIONS.parse(raw, connector="kafka")


def problem(excinfo: pytest.ExceptionInfo[OptionError]) -> str:
    assert len(excinfo.value.problems) == 1, excinfo.value.problems
    return excinfo.value.problems[0]


# --- offset JSON ---------------------------------------------------------------------------


def test_json_offset_is_sparks_shape_sorted():
    offsets = {("t", 10): 7, ("b", 1): 2, ("t", 2): 3, ("b", 0): 1}
    json_offset = to_json_offset(offsets)
    assert json_offset == {"b": {"0": 1, "1": 2}, "t": {"2": 3, "10": 7}}
    assert list(json_offset) == ["b", "t"]
    assert list(json_offset["t"]) == ["2", "10"]  # numerically, not as strings
    assert from_json_offset(json_offset) == offsets


def test_json_offset_round_trips_empty():
    assert to_json_offset({}) == {}
    assert from_json_offset({}) == {}


@pytest.mark.parametrize(
    "bad",
    [[1, 2], {"t": [0]}, {"t": {"x": 1}}, {"t": {"0": "a"}}, {"t": {"0": True}}, {"t": {"-1": 3}}],
)
def test_from_json_offset_refuses_other_shapes(bad):
    with pytest.raises(ValueError, match=r'Expected e\.g\. \{"topicA"'):
        from_json_offset(bad)


def test_describe_tp_as_kafka_prints_it():
    assert describe_tp(("orders", 3)) == "orders-3"


# --- startingOffsets -------------------------------------------------------------------------


def test_defaults_latest_for_streams_earliest_for_batch():
    assert starting_offsets(opts(), streaming=True) == StartingOffsets("latest")
    assert starting_offsets(opts(), streaming=False) == StartingOffsets("earliest")


@pytest.mark.parametrize("text", ["earliest", " Earliest ", "EARLIEST"])
def test_earliest_any_case(text):
    assert starting_offsets(opts(startingOffsets=text), streaming=True).kind == "earliest"


def test_latest_in_a_stream():
    assert starting_offsets(opts(startingOffsets="latest"), streaming=True).kind == "latest"


def test_specific_offsets_json():
    start = starting_offsets(
        opts(startingOffsets='{"a":{"0":23,"1":-2},"b":{"0":-1}}'), streaming=True
    )
    assert start.kind == "specific"
    assert start.offsets == {A0: 23, A1: -2, B0: -1}


def test_specific_offsets_not_json_is_sparks_text():
    with pytest.raises(OptionError) as excinfo:
        starting_offsets(opts(startingOffsets="beginning"), streaming=True)
    assert problem(excinfo) == (
        'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got beginning'
    )


def test_specific_offsets_wrong_shape_is_sparks_text():
    with pytest.raises(OptionError) as excinfo:
        starting_offsets(opts(startingOffsets='{"a":[0,1]}'), streaming=True)
    assert problem(excinfo).startswith('Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}')
    assert "got {" in problem(excinfo)


def test_specific_offset_below_minus_two_is_refused():
    with pytest.raises(OptionError) as excinfo:
        starting_offsets(opts(startingOffsets='{"a":{"0":-3}}'), streaming=True)
    assert problem(excinfo) == (
        "startingOffsets for a-0 is -3: use an offset of 0 or more, -1 for latest or -2 for "
        "earliest"
    )


def test_batch_read_refuses_latest_start():
    with pytest.raises(OptionError) as excinfo:
        starting_offsets(opts(startingOffsets="latest"), streaming=False)
    assert problem(excinfo) == "starting offset can't be latest for batch queries on Kafka"
    assert "Invalid options for 'kafka'" in str(excinfo.value)


def test_batch_read_refuses_minus_one_in_start_json():
    with pytest.raises(OptionError) as excinfo:
        starting_offsets(opts(startingOffsets='{"a":{"0":-1,"1":3}}'), streaming=False)
    assert problem(excinfo) == "startingOffsets for a-0 can't be latest for batch queries on Kafka"


def test_starting_timestamp_wins_over_the_others():
    start = starting_offsets(
        opts(
            startingTimestamp="1700000000000",
            startingOffsetsByTimestamp='{"a":{"0":1}}',
            startingOffsets="earliest",
        ),
        streaming=True,
    )
    assert start == StartingOffsets("timestamp", timestamp=1700000000000)


def test_by_timestamp_wins_over_starting_offsets():
    start = starting_offsets(
        opts(startingOffsetsByTimestamp='{"a":{"0":1000,"1":2000}}', startingOffsets="latest"),
        streaming=True,
    )
    assert start.kind == "by_timestamp"
    assert start.timestamps == {A0: 1000, A1: 2000}


def test_starting_timestamp_not_a_number_is_sparks_text():
    with pytest.raises(OptionError) as excinfo:
        starting_offsets(opts(startingTimestamp=" yesterday "), streaming=True)
    assert problem(excinfo) == "Expected a single long value, got yesterday"


def test_by_timestamp_wrong_shape_is_sparks_text():
    with pytest.raises(OptionError) as excinfo:
        starting_offsets(opts(startingOffsetsByTimestamp='{"a":{"zero":1}}'), streaming=True)
    assert problem(excinfo).startswith(
        'Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, '
        '"topicB": {"0": 123456789, "1": 123456789}}, got '
    )


def test_strategy_is_carried():
    start = starting_offsets(
        opts(startingTimestamp=5, startingOffsetsByTimestampStrategy="LATEST"), streaming=True
    )
    assert start.strategy == "latest"
    assert starting_offsets(opts(startingTimestamp=5), streaming=True).strategy == "error"


def test_strategy_choices_come_from_the_option():
    with pytest.raises(OptionError, match="must be one of error, latest"):
        opts(startingOffsetsByTimestampStrategy="earliest")


# --- endingOffsets -------------------------------------------------------------------------


def test_ending_offsets_refused_in_streams():
    with pytest.raises(OptionError) as excinfo:
        ending_offsets(opts(endingOffsets="latest"), streaming=True)
    assert problem(excinfo) == "ending offset not valid in streaming queries"


def test_streams_end_at_latest():
    assert ending_offsets(opts(), streaming=True) == "latest"


def test_batch_ending_defaults_and_json():
    assert ending_offsets(opts(), streaming=False) == "latest"
    assert ending_offsets(opts(endingOffsets=" LATEST "), streaming=False) == "latest"
    assert ending_offsets(opts(endingOffsets='{"a":{"0":9,"1":-1}}'), streaming=False) == {
        A0: 9,
        A1: -1,
    }


def test_batch_ending_earliest_refused():
    with pytest.raises(OptionError) as excinfo:
        ending_offsets(opts(endingOffsets="earliest"), streaming=False)
    assert problem(excinfo) == "ending offset can't be earliest for batch queries on Kafka"


def test_batch_ending_minus_two_refused():
    with pytest.raises(OptionError) as excinfo:
        ending_offsets(opts(endingOffsets='{"a":{"0":-2}}'), streaming=False)
    assert problem(excinfo) == "ending offset for a-0 can't be earliest for batch queries on Kafka"


def test_batch_start_and_end_json_must_name_the_same_partitions():
    with pytest.raises(OptionError) as excinfo:
        ending_offsets(
            opts(startingOffsets='{"a":{"0":1,"1":1}}', endingOffsets='{"a":{"0":5}}'),
            streaming=False,
        )
    assert problem(excinfo) == (
        "The specified start offset and end offset should have the same topic-partitions. "
        "Topic-partitions for start offset: [a-0, a-1], topic-partitions for end offset: [a-0]."
    )


def test_batch_start_after_end_refused_before_resolution():
    with pytest.raises(OptionError) as excinfo:
        ending_offsets(
            opts(startingOffsets='{"a":{"0":10,"1":-2}}', endingOffsets='{"a":{"0":5,"1":-1}}'),
            streaming=False,
        )
    assert problem(excinfo) == (
        "The specified start offset 10 is greater than the end offset 5 for topic a partition 0."
    )


def test_offset_options_reports_every_problem_at_once():
    with pytest.raises(OptionError) as excinfo:
        offset_options(opts(startingOffsets="latest", endingOffsets="earliest"), streaming=False)
    assert excinfo.value.problems == [
        "starting offset can't be latest for batch queries on Kafka",
        "ending offset can't be earliest for batch queries on Kafka",
    ]


def test_offset_options_in_a_stream():
    start, end = offset_options(opts(startingOffsets="earliest"), streaming=True)
    assert start.kind == "earliest" and end == "latest"


# --- resolution ----------------------------------------------------------------------------


def test_resolve_earliest_and_latest():
    assert StartingOffsets("earliest").resolve(ASSIGNED, EARLIEST, LATEST, {}) == EARLIEST
    assert StartingOffsets("latest").resolve(ASSIGNED, EARLIEST, LATEST, {}) == LATEST


def test_resolve_specific_with_minus_two_and_minus_one():
    start = StartingOffsets("specific", offsets={A0: 23, A1: -2, B0: -1})
    assert start.resolve(ASSIGNED, EARLIEST, LATEST, {}) == {A0: 23, A1: 0, B0: 30}


def test_resolve_specific_keeps_an_offset_out_of_range_for_planning_to_report():
    start = StartingOffsets("specific", offsets={A0: 999, A1: 0, B0: 0})
    assert start.resolve(ASSIGNED, EARLIEST, LATEST, {})[A0] == 999


def test_resolve_specific_must_name_every_assigned_partition():
    start = StartingOffsets("specific", offsets={A0: 1, B0: 2})
    with pytest.raises(SourceError) as excinfo:
        start.resolve(ASSIGNED, EARLIEST, LATEST, {})
    assert str(excinfo.value) == (
        "If startingOffsets contains specific offsets, you must specify all TopicPartitions.\n"
        "Use -1 for latest, -2 for earliest.\n"
        "Specified: [a-0, b-0] Assigned: [a-0, a-1, b-0]"
    )


def test_resolve_specific_naming_an_unassigned_partition():
    start = StartingOffsets("specific", offsets={A0: 1, A1: 1, B0: 2, ("c", 0): 0})
    with pytest.raises(SourceError, match=r"Specified: \[a-0, a-1, b-0, c-0\]"):
        start.resolve(ASSIGNED, EARLIEST, LATEST, {})


def test_global_timestamp_asks_every_partition_and_resolves():
    start = StartingOffsets("timestamp", timestamp=1000)
    assert start.timestamps_for(ASSIGNED) == {A0: 1000, A1: 1000, B0: 1000}
    found = {A0: 7, A1: 3, B0: 2}
    assert start.resolve(ASSIGNED, EARLIEST, LATEST, found) == found


def test_timestamp_without_match_fails_with_sparks_text():
    start = StartingOffsets("timestamp", timestamp=1000)
    with pytest.raises(SourceError) as excinfo:
        start.resolve(ASSIGNED, EARLIEST, LATEST, {A0: 7, A1: None, B0: 2})
    assert str(excinfo.value) == (
        "No offset matched from request of topic-partition a-1 and timestamp 1000."
    )


def test_timestamp_without_match_minus_one_also_counts_as_no_match():
    start = StartingOffsets("timestamp", timestamp=1000)
    with pytest.raises(SourceError, match="topic-partition a-0 and timestamp 1000"):
        start.resolve(ASSIGNED, EARLIEST, LATEST, {A0: -1, A1: 1, B0: 2})


def test_timestamp_without_match_latest_strategy():
    start = StartingOffsets("timestamp", timestamp=1000, strategy="latest")
    resolved = start.resolve(ASSIGNED, EARLIEST, LATEST, {A0: 7, A1: None, B0: -1})
    assert resolved == {A0: 7, A1: 40, B0: 30}


def test_by_timestamp_must_name_every_assigned_partition():
    start = StartingOffsets("by_timestamp", timestamps={A0: 10, A1: 20})
    with pytest.raises(SourceError) as excinfo:
        start.timestamps_for(ASSIGNED)
    assert str(excinfo.value) == (
        "Partitions specified for Kafka timestamp based start offsets don't match what are "
        "assigned. Maybe topic partitions are created or deleted while the query is running, "
        "or you didn't specify all the partitions. Specified: [a-0, a-1] Assigned: "
        "[a-0, a-1, b-0]"
    )
    with pytest.raises(SourceError, match="timestamp based start offsets"):
        start.resolve(ASSIGNED, EARLIEST, LATEST, {A0: 1, A1: 1, B0: 1})


def test_by_timestamp_resolves_with_its_own_timestamps_in_the_error():
    start = StartingOffsets("by_timestamp", timestamps={A0: 10, A1: 20, B0: 30})
    assert start.timestamps_for(ASSIGNED) == {A0: 10, A1: 20, B0: 30}
    with pytest.raises(SourceError, match="topic-partition b-0 and timestamp 30"):
        start.resolve(ASSIGNED, EARLIEST, LATEST, {A0: 1, A1: 2, B0: None})


def test_offsets_kinds_need_no_timestamps():
    assert StartingOffsets("earliest").timestamps_for(ASSIGNED) == {}
    assert not StartingOffsets("specific", offsets={A0: 1}).by_time
    assert StartingOffsets("timestamp", timestamp=1).by_time


def test_resolve_without_known_offsets_of_a_partition():
    with pytest.raises(SourceError, match="no earliest offset known for topic-partition b-0"):
        StartingOffsets("earliest").resolve(ASSIGNED, {A0: 0, A1: 0}, LATEST, {})


def test_resolve_ending():
    assert resolve_ending("latest", ASSIGNED, LATEST) == LATEST
    assert resolve_ending({A0: 9, A1: -1, B0: 3}, ASSIGNED, LATEST) == {A0: 9, A1: 40, B0: 3}
    with pytest.raises(SourceError, match=r"Specified: \[a-0\] Assigned: \[a-0, a-1, b-0\]"):
        resolve_ending({A0: 9}, ASSIGNED, LATEST)


def test_check_batch_range():
    check_batch_range({A0: 1, A1: 2}, {A0: 1, A1: 5})
    with pytest.raises(SourceError) as excinfo:
        check_batch_range({A0: 6, A1: 2}, {A0: 5, A1: 5})
    assert str(excinfo.value).startswith(
        "The resolved start offset 6 is greater than the resolved end offset 5 for topic a "
        "partition 0. There may be multiple reasons:"
    )
    with pytest.raises(SourceError, match="should have the same topic-partitions"):
        check_batch_range({A0: 1}, {A1: 1})


# --- options declared otherwise (types and names the parsing also accepts) ------------------

LOOSE = OptionSpec(
    Option(name="startingOffsets"),
    Option(name="startingTimestamp", type="int"),
    Option(name="startingOffsetsByTimestamp"),
    Option(name="startingOffsetsByTimestampStrategy"),
    Option(name="endingOffsets", type="json"),
    Option(name="endingOffsetsByTimestamp"),
)


def loose(**given: Any):
    return LOOSE.parse(given, connector="kafka")


def test_ending_timestamps_refused_in_streams_when_declared():
    with pytest.raises(OptionError) as excinfo:
        ending_offsets(loose(endingOffsetsByTimestamp='{"a":{"0":1}}'), streaming=True)
    assert problem(excinfo) == "ending timestamp not valid in streaming queries"


def test_undeclared_ending_timestamps_are_not_looked_up():
    assert ending_offsets(opts(), streaming=True) == "latest"


def test_strategy_declared_as_a_plain_string_is_checked():
    with pytest.raises(OptionError) as excinfo:
        starting_offsets(
            loose(startingTimestamp=1, startingOffsetsByTimestampStrategy="newest"),
            streaming=True,
        )
    assert problem(excinfo) == (
        "startingOffsetsByTimestampStrategy must be 'error' or 'latest', got 'newest'"
    )


def test_integer_timestamp_and_json_given_as_text():
    start = starting_offsets(loose(startingTimestamp="17"), streaming=False)
    assert start == StartingOffsets("timestamp", timestamp=17)
    start = starting_offsets(loose(startingOffsetsByTimestamp='{"a":{"1":5}}'), streaming=True)
    assert start.timestamps == {A1: 5}
    # endingOffsets decoded by the option itself (type json) is taken as a mapping
    assert ending_offsets(loose(endingOffsets='{"a":{"0":3}}'), streaming=False) == {A0: 3}


def test_by_timestamp_text_not_json_is_sparks_text():
    with pytest.raises(OptionError) as excinfo:
        starting_offsets(loose(startingOffsetsByTimestamp="{nope"), streaming=True)
    assert problem(excinfo) == (
        'Expected e.g. {"topicA": {"0": 123456789, "1": 123456789}, '
        '"topicB": {"0": 123456789, "1": 123456789}}, got {nope'
    )
