"""failOnDataLoss: Spark's texts, raising or warning and counting, and the planning checks."""

from __future__ import annotations

import logging

import pytest

from microbatch import SourceError
from microbatch_kafka._data_loss import (
    DATA_LOSS,
    DataLoss,
    added_partition_not_zero,
    check_planned,
    deleted_partitions,
    initial_offsets_missing,
    offset_changed,
    records_missing,
)

LOGGER = "test.kafka.data_loss"
P0, P1, P2 = ("t", 0), ("t", 1), ("t", 2)
SPARK_PREFIX = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set the "
    "source option failOnDataLoss to false. Reason:"
)
SPARK_WARNING = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "true".'
)


def failing() -> DataLoss:
    return DataLoss(True, "grp-1", logger=logging.getLogger(LOGGER))


def skipping() -> DataLoss:
    return DataLoss(False, "grp-1", logger=logging.getLogger(LOGGER))


# --- texts ---------------------------------------------------------------------------------


def test_reason_texts():
    assert DATA_LOSS == SPARK_PREFIX
    assert initial_offsets_missing([P1, P0]) == (
        "Cannot find initial offsets for partitions [t-0, t-1]. They may have been deleted."
    )
    assert added_partition_not_zero(P2, 17) == "Added partition t-2 starts from 17 instead of 0."
    assert deleted_partitions([P1]) == "Partitions [t-1] have been deleted."
    assert offset_changed(P0, 50, 3) == (
        "Partition t-0 offset was changed from 50 to 3. This could either be a user error that "
        "the start offset is set too high and this is the first batch, or the kafka "
        "topic-partition is broken, and some data may have been missed."
    )
    assert records_missing(20, 60, P0, "grp-1") == (
        "Could not read records in offset [20, 60) for topic partition t-0 with consumer group "
        "grp-1."
    )


def test_deleted_partitions_with_a_custom_group_id_adds_sparks_warning():
    text = deleted_partitions([P0], custom_group_id=True)
    assert text.startswith(
        "Partitions [t-0] have been deleted. Kafka option 'kafka.group.id' has been set on this "
        "query, it is not recommended to set this option."
    )
    assert text.endswith("before the restarted query starts running.")


# --- DataLoss ------------------------------------------------------------------------------


def test_fail_raises_source_error_with_the_prefix_and_the_reason(caplog):
    loss = failing()
    with pytest.raises(SourceError) as excinfo:
        loss.report(records_missing(20, 60, P0, loss.group_id), 40)
    assert str(excinfo.value) == (
        f"{SPARK_PREFIX} Could not read records in offset [20, 60) for topic partition t-0 "
        "with consumer group grp-1."
    )
    assert loss.metrics() == {"dataLoss": "0", "offsetOutOfRange": "0"}
    assert not caplog.records


def test_not_failing_warns_and_counts(caplog):
    loss = skipping()
    assert loss.metrics() == {"dataLoss": "0", "offsetOutOfRange": "0"}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        loss.report(records_missing(20, 60, P0, "grp-1"), 40)
        loss.report(deleted_partitions([P1]), 0)
    assert loss.metrics() == {"dataLoss": "2", "offsetOutOfRange": "40"}
    assert (loss.events, loss.offsets_skipped) == (2, 40)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "Could not read records in offset [20, 60) for topic partition t-0 with consumer group "
        f"grp-1. {SPARK_WARNING}",
        f"Partitions [t-1] have been deleted. {SPARK_WARNING}",
    ]


# --- planning checks -----------------------------------------------------------------------


def test_nothing_lost_reads_from_start():
    loss = failing()
    starts = check_planned({P0: 5, P1: 0}, {P0: 10, P1: 4}, {P0: 0, P1: 0}, loss)
    assert starts == {P0: 5, P1: 0}


def test_records_deleted_under_the_range_fail():
    with pytest.raises(
        SourceError,
        match=r"Could not read records in offset \[20, 60\) for topic partition t-0 with "
        r"consumer group grp-1\.",
    ):
        check_planned({P0: 20}, {P0: 100}, {P0: 60}, failing())


def test_records_deleted_under_the_range_skip_to_earliest(caplog):
    loss = skipping()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        starts = check_planned({P0: 20, P1: 3}, {P0: 100, P1: 9}, {P0: 60, P1: 0}, loss)
    assert starts == {P0: 60, P1: 3}
    assert loss.metrics() == {"dataLoss": "1", "offsetOutOfRange": "40"}
    assert "[20, 60) for topic partition t-0" in caplog.text


def test_whole_range_gone_skips_it_all():
    loss = skipping()
    starts = check_planned({P0: 20}, {P0: 40}, {P0: 60}, loss)
    assert starts == {P0: 40}  # nothing to read: the range [20, 40) is gone
    assert loss.metrics() == {"dataLoss": "1", "offsetOutOfRange": "20"}


def test_empty_range_below_earliest_is_not_reported_yet():
    loss = failing()
    assert check_planned({P0: 20}, {P0: 20}, {P0: 60}, loss) == {P0: 20}


def test_offset_went_backwards_fails():
    with pytest.raises(SourceError) as excinfo:
        check_planned({P0: 50}, {P0: 3}, {P0: 0}, failing())
    assert str(excinfo.value) == f"{SPARK_PREFIX} {offset_changed(P0, 50, 3)}"


def test_offset_went_backwards_continues_from_latest():
    loss = skipping()
    starts = check_planned({P0: 50, P1: 1}, {P0: 3, P1: 2}, {P0: 0, P1: 0}, loss)
    assert starts == {P0: 3, P1: 1}
    assert loss.metrics() == {"dataLoss": "1", "offsetOutOfRange": "0"}


def test_deleted_partition_fails():
    with pytest.raises(SourceError, match=r"Reason: Partitions \[t-1\] have been deleted\.$"):
        check_planned({P0: 1, P1: 1}, {P0: 5}, {P0: 0}, failing())


def test_deleted_partition_is_dropped():
    loss = skipping()
    assert check_planned({P0: 1, P1: 1}, {P0: 5}, {P0: 0}, loss) == {P0: 1}
    assert loss.metrics() == {"dataLoss": "1", "offsetOutOfRange": "0"}


def test_deleted_partition_with_custom_group_id():
    loss = DataLoss(True, "mine", logger=logging.getLogger(LOGGER), custom_group_id=True)
    with pytest.raises(SourceError, match=r"kafka\.group\.id' has been set on this query"):
        check_planned({P0: 1, P1: 1}, {P0: 5}, {P0: 0}, loss)


def test_new_partition_starts_at_earliest_zero():
    assert check_planned({P0: 1}, {P0: 5, P1: 7}, {P0: 0, P1: 0}, failing()) == {P0: 1, P1: 0}


def test_new_partition_not_starting_at_zero():
    with pytest.raises(
        SourceError, match=r"Reason: Added partition t-1 starts from 4 instead of 0\.$"
    ):
        check_planned({P0: 1}, {P0: 5, P1: 7}, {P0: 0, P1: 4}, failing())
    loss = skipping()
    assert check_planned({P0: 1}, {P0: 5, P1: 7}, {P0: 0, P1: 4}, loss) == {P0: 1, P1: 4}
    assert loss.metrics() == {"dataLoss": "1", "offsetOutOfRange": "4"}


def test_new_partition_without_earliest_offset():
    with pytest.raises(
        SourceError, match=r"Cannot find initial offsets for partitions \[t-1, t-2\]"
    ):
        check_planned({P0: 1}, {P0: 5, P1: 7, P2: 1}, {P0: 0}, failing())
    loss = skipping()
    assert check_planned({P0: 1}, {P0: 5, P1: 7, P2: 1}, {P0: 0}, loss) == {P0: 1}
    assert loss.metrics() == {"dataLoss": "1", "offsetOutOfRange": "0"}


def test_partition_without_earliest_offset_reads_from_start():
    # An earliest offset that could not be looked up for a known partition: nothing is known
    # to be lost.
    assert check_planned({P0: 3}, {P0: 5}, {}, failing()) == {P0: 3}


def test_several_findings_counted_each():
    loss = skipping()
    starts = check_planned(
        {P0: 10, P1: 50, ("gone", 0): 3},
        {P0: 100, P1: 40, P2: 9},
        {P0: 30, P1: 0, P2: 2},
        loss,
    )
    assert starts == {P0: 30, P1: 40, P2: 2}
    assert loss.metrics() == {"dataLoss": "4", "offsetOutOfRange": str(20 + 2)}
