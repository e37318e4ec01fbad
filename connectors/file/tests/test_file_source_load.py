"""What ``load()`` settles for a file source: an inferred schema, pinned; progress metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

import microbatch as mb
from microbatch.errors import SchemaError


def test_the_source_option_enables_inference_and_the_schema_is_pinned_at_load(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.json").write_text('{"id": 1, "name": "x"}\n')
    session = mb.Session()
    frame = session.read_stream.format("json").option("schemaInference", True).load(str(tmp_path))
    assert frame.schema.names == ["id", "name"]
    (tmp_path / "b.json").write_text('{"id": 2, "name": "y", "extra": true}\n')
    query = frame.write_stream.format("memory").query_name("pinned").trigger(once=True).start()
    query.await_termination()
    assert session.table("pinned").schema.names == ["id", "name"]  # inferred once, at load
    metrics = query.last_progress["sources"][0]["metrics"]
    assert metrics["numFilesOutstanding"] == "0"


def test_inference_on_an_empty_folder_fails_at_load(tmp_path: Path) -> None:
    session = mb.Session()
    with pytest.raises(mb.MicrobatchError, match="Unable to infer schema"):
        session.read_stream.format("json").option("schemaInference", True).load(str(tmp_path))
    with pytest.raises(SchemaError, match='option\\("schemaInference", True\\)'):
        session.read_stream.format("json").load(str(tmp_path))


def test_making_the_connector_objects_does_no_io(tmp_path: Path) -> None:
    from microbatch.errors import ConfigurationError
    from microbatch_file.sinks import ParquetFileSink
    from microbatch_file.sources import JsonFileSource

    folder = tmp_path / "in"
    folder.mkdir()
    options = JsonFileSource.options.parse({"path": str(folder)}, connector="json")
    folder.rmdir()
    source = JsonFileSource(options, user_schema=mb.parse_ddl("id BIGINT"))
    assert source.describe() == f"FileStreamSource[file:{folder}]"
    with pytest.raises(ConfigurationError, match="PATH_NOT_FOUND"):
        source.schema()  # the folder is looked at here, once per load()
    out = tmp_path / "out"
    sink = ParquetFileSink(ParquetFileSink.options.parse({"path": str(out)}, connector="parquet"))
    assert sink.describe() == f"FileSink[file:{out}]"
    assert not out.exists()
    out.write_bytes(b"a file, not a folder")
    with pytest.raises(ConfigurationError, match="is a file"):
        sink.stream_writer(mb.WriteContext(schema=mb.parse_ddl("id BIGINT"), query_id="q"))
