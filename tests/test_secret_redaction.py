"""Secret option values never reach errors, their chains, tracebacks, logs, status or progress.

Test connectors declare secret options and fail, at ``start()``/``load()`` and while running,
with exceptions that carry the secret in every way an exception can: its message, a custom
``__str__``, ``repr`` escapes, URL-encoding, notes, causes and contexts (also cyclic), exception
groups, a ``str()`` that raises, a ``BaseException``, frame locals. The secrets live only in
module constants so that no source line shown in a traceback contains them.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import traceback
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import microbatch as mb
from microbatch.errors import StreamingQueryException
from microbatch.options import REDACTED, Option, OptionSpec, redact_error, scrub

SCHEMA = pa.schema([("value", pa.int64())])
SECRET = 'Hunter"2\\wörd +/&€'  # a quote, a backslash, non-ASCII, a space, URL specials
TOKEN = "tok-Zebra-Quasar-91"
SHORT = "z9"
MARK = "Hunter"  # every printed form of SECRET keeps this part as it is


def forms(secret: str) -> list[str]:
    """The ways code commonly prints a secret."""
    quoted = urllib.parse.quote(secret, safe="")
    found = {
        secret,
        repr(secret)[1:-1],
        repr(repr(secret))[1:-1],
        ascii(secret)[1:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret.encode())[2:-1],
        urllib.parse.quote(secret),
        quoted,
        re.sub("%[0-9A-F]{2}", lambda hexes: hexes.group().lower(), quoted),
        urllib.parse.quote(quoted),
        urllib.parse.quote_plus(secret),
    }
    return sorted(found)


def leaks(text: str, secret: str) -> list[str]:
    """The printed forms of ``secret`` found in ``text``."""
    found = [form for form in forms(secret) if form in text]
    if secret != SHORT and MARK in secret and MARK in text:
        found.append(MARK)
    return found


# -- test connectors ---------------------------------------------------------------------------
class CustomStrError(Exception):
    """Ignores its args: only ``__str__`` shows the secret (cleaning ``args`` is not enough)."""

    def __init__(self, password: str) -> None:
        super().__init__()
        self.password = password

    def __str__(self) -> str:
        return f"login refused for {self.password}"


class UnprintableError(Exception):
    """``str()`` and ``repr()`` raise, with the secret in their own message."""

    def __init__(self, password: str) -> None:
        super().__init__()
        self.password = password

    def __str__(self) -> str:
        raise RuntimeError(f"cannot show {self.password}")

    def __repr__(self) -> str:
        raise RuntimeError(f"cannot show {self.password}")


class Interrupted(BaseException):
    """Not an ``Exception``: takes the query down through another branch."""


class ConnectorFailure(Exception):
    pass


def failure(mode: str, password: str) -> BaseException:
    """An exception carrying ``password`` the way ``mode`` says (raised by the caller)."""
    if mode in ("plain", "short"):
        return ConnectionError(f"login {password} refused by the server")
    if mode == "str":
        return CustomStrError(password)
    if mode == "repr":
        return ValueError(f"bad credentials {password!r} (and {repr(password)!r})")
    if mode == "url":
        return ConnectionError(
            f"GET https://api.test/v1?key={urllib.parse.quote_plus(password)} and "
            f"https://u:{urllib.parse.quote(password, safe='')}@db.test/ failed"
        )
    if mode == "chain":
        try:
            try:
                raise KeyError(password)
            except KeyError as lookup:
                raise OSError(13, f"permission denied for {password}", f"/x/{password}") from lookup
        except OSError as low:
            error = ConnectorFailure("the connector failed; see the cause")
            error.__cause__ = low
            error.__context__ = low
            error.add_note(f"note: the password was {password}")
            error.attempted = password  # type: ignore[attr-defined]
            return error
    if mode == "group":
        return ExceptionGroup(
            f"2 reads failed for {password}",
            [ValueError(f"first {password}"), CustomStrError(password)],
        )
    if mode == "unprintable":
        return UnprintableError(password)
    if mode == "cycle":
        first, second = ConnectorFailure(f"one {password}"), ValueError(f"two {password!r}")
        first.__context__, second.__context__ = second, first
        return first
    if mode == "base":
        return Interrupted(f"stopped while holding {password}")
    raise AssertionError(mode)


@dataclass(frozen=True)
class Numbered(mb.Split):
    n: int


class SecretReader(mb.StreamReader, mb.SplitReader):
    """Counts up; shows the password in its metrics (as a URL would); fails per ``fail_mode``
    when planning or reading batch ``fail_at``."""

    def __init__(self, opts: mb.Options) -> None:
        self.opts = opts

    def metrics(self) -> dict[str, Any]:
        return {"endpoint": f"https://user:{self.opts.password}@db.test", "reads": 1}

    def initial_offset(self) -> dict[str, int]:
        return {"n": 0}

    def latest_offset(self, start: dict[str, int], limit: mb.ReadLimit) -> dict[str, int]:
        return {"n": start["n"] + 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Numbered]:
        password = self.opts.password
        if end["n"] == self.opts.fail_at and self.opts.fail_in == "plan":
            raise failure(self.opts.fail_mode, password)
        return [Numbered(end["n"])]

    def read(self, split: mb.Split) -> Iterator[pa.RecordBatch]:
        assert isinstance(split, Numbered)
        password = self.opts.password
        if split.n == self.opts.fail_at and self.opts.fail_in == "read":
            raise failure(self.opts.fail_mode, password)
        yield pa.record_batch([pa.array([split.n], pa.int64())], schema=SCHEMA)


class SecretSource(mb.Source):
    """Shows its password in ``describe()``; fails per ``failMode`` when starting
    (``failAt=0``) or when reading batch ``failAt``."""

    format_name = "secret-source-test"
    options = OptionSpec(
        Option(name="password", secret=True, required=True, doc="the password"),
        Option(name="failMode", default="plain", doc="how to fail (see failure())"),
        Option(name="failAt", type="int", default=-1, doc="batch to fail in; 0: at start"),
        Option(name="failIn", default="read", choices=("read", "plan"), doc="where to fail"),
        prefixes=("client.",),
    )

    def schema(self) -> pa.Schema:
        return SCHEMA

    def describe(self) -> str:
        return f"SecretSource[https://user:{self.opts.password}@db.test]"

    def stream_reader(self, context: mb.ReadContext) -> mb.StreamReader:
        password = self.opts.password  # a local that tools printing locals would show
        if self.opts.fail_at == 0:
            raise failure(self.opts.fail_mode, password)
        return SecretReader(self.opts)


class ProbedSecretSource(SecretSource):
    """Takes an optional schema: ``read_stream.load()`` asks for it (and fails)."""

    format_name = "secret-probed-test"
    capabilities = mb.SourceCapabilities(user_schema="optional")

    def schema(self) -> pa.Schema:
        password = self.opts.password  # a local that tools printing locals would show
        if self.opts.fail_at == 0:
            raise failure(self.opts.fail_mode, password)
        return SCHEMA


class SecretWriter(mb.StreamWriter, mb.PartWriter):
    """Fails writing batch ``fail_at`` with its token in the message."""

    def __init__(self, token: str, fail_at: int) -> None:
        self.token = token
        self.fail_at = fail_at

    def write(self, data: pa.RecordBatchReader, part: mb.PartContext) -> None:
        data.read_all()
        if part.batch_id == self.fail_at:
            raise CustomStrError(self.token)

    def commit(self, messages: Any, batch_id: int) -> None:
        pass

    def abort(self, messages: Any, batch_id: int) -> None:
        raise ConnectorFailure(f"abort failed, token {self.token}")


class SecretSink(mb.Sink):
    """Fails writing batch ``failAt`` with its token in the message."""

    format_name = "secret-sink-test"
    capabilities = mb.SinkCapabilities(needs_checkpoint=False)
    options = OptionSpec(
        Option(name="token", secret=True, required=True, doc="the token"),
        Option(name="failAt", type="int", default=-1, doc="batch to fail in"),
    )

    def describe(self) -> str:
        return f"SecretSink[token={self.opts.token}]"

    def stream_writer(self, context: mb.WriteContext) -> mb.StreamWriter:
        return SecretWriter(self.opts.token, self.opts.fail_at)


class Recorder(mb.StreamingQueryListener):
    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_query_progress(self, event: Any) -> None:
        self.events.append(event)

    def on_query_terminated(self, event: Any) -> None:
        self.events.append(event)


@pytest.fixture
def session(session: mb.Session, register: Callable[..., None]) -> mb.Session:
    register(session, "secret-test", SecretSource, ProbedSecretSource, SecretSink)
    return session


# -- what is checked ---------------------------------------------------------------------------
def chain(error: BaseException) -> list[BaseException]:
    """``error`` and everything reachable through causes, contexts and group members."""
    seen: dict[int, BaseException] = {}
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen[id(current)] = current
        links = [current.__cause__, current.__context__]
        links += list(getattr(current, "exceptions", ()))
        pending += [link for link in links if link is not None]
    return list(seen.values())


def shown_error(error: BaseException) -> list[str]:
    """Everything a user, a logger or an error reporter can print of ``error``."""
    texts = ["".join(traceback.format_exception(error))]
    for member in chain(error):
        texts += [str(member), repr(member), repr(member.args)]
        texts += [str(note) for note in getattr(member, "__notes__", [])]
        texts += [repr(value) for value in vars(member).values()]
        tb = member.__traceback__
        while tb is not None:  # frame locals, as Sentry or rich(show_locals) print them
            code = tb.tb_frame.f_code  # (but not those of the calling test: the user's own)
            if code.co_filename != __file__ or not code.co_name.startswith(USER_CODE):
                texts += [f"{name}={value!r}" for name, value in tb.tb_frame.f_locals.items()]
            tb = tb.tb_next
    return texts


USER_CODE = ("test_", "run_failing")


def assert_clean(texts: list[str], secret: str) -> None:
    for text in texts:
        assert not leaks(text, secret), f"{leaks(text, secret)} shown in:\n{text}"


def run_failing(
    session: mb.Session, mode: str, password: str, caplog: Any, where: str = "read"
) -> tuple[Any, Any]:
    recorder = Recorder()
    session.streams.add_listener(recorder)
    frame = (
        session.read_stream.format("secret-source-test")
        .options(password=password, failMode=mode, failAt=2, failIn=where)
        .option("client.auth.token", TOKEN)
        .load()
    )
    with caplog.at_level(logging.DEBUG, logger="microbatch"):
        query = frame.write_stream.format("noop").start()
        with pytest.raises(StreamingQueryException) as caught:
            query.await_termination(timeout=20)
    assert caught.value is query.exception()
    return query, recorder


RUN_MODES = ["plain", "str", "repr", "url", "chain", "group", "unprintable", "cycle", "base"]


@pytest.mark.parametrize("where", ["read", "plan"])
@pytest.mark.parametrize("mode", RUN_MODES)
def test_a_failing_query_shows_no_secret_anywhere(
    session: mb.Session, mode: str, where: str, caplog: Any, capsys: Any
) -> None:
    query, recorder = run_failing(session, mode, SECRET, caplog, where)
    error = query.exception()
    query.explain(extended=True)
    texts = shown_error(error)
    texts += [caplog.text, capsys.readouterr().out, json.dumps(query.status)]
    texts += [logging.Formatter().format(record) for record in caplog.records]
    texts += [json.dumps(query.recent_progress, default=str)]
    texts += [
        json.dumps(event if isinstance(event, dict) else vars(event), default=str)
        for event in recorder.events
    ]
    assert_clean(texts, SECRET)
    assert_clean(texts, TOKEN)  # a passthrough option whose name says it is a secret
    # ...and the error is still useful: the original type, the rest of the message, and where
    cause = error.cause
    expected = type(failure(mode, "x"))
    if (mode, where) != ("unprintable", "read"):  # (pyarrow replaces it with what str() raised)
        assert isinstance(cause, expected) and type(cause).__name__ == expected.__name__
        method = {"plan": "partitions"}.get(where, where)
        assert f"in {method}" in "".join(traceback.format_exception(error))  # the raising frame
    assert error.__cause__ is cause and f"terminated with exception: {type(cause).__name__}" in str(
        error
    )
    assert "Traceback" in caplog.text
    assert REDACTED in caplog.text or "str() failed" in caplog.text
    terminated = recorder.events[-1]
    assert terminated.error_class == type(cause).__name__ and terminated.exception == str(error)
    assert [p["batchId"] for p in query.recent_progress] == [0]
    assert query.recent_progress[0]["sources"][0]["description"] == f"SecretSource[{_url()}]"


def _url() -> str:
    return f"https://user:{REDACTED}@db.test"


def test_the_redacted_cause_keeps_message_chain_and_notes(session: mb.Session, caplog: Any) -> None:
    query, _ = run_failing(session, "chain", SECRET, caplog)
    cause = query.exception().cause
    assert str(cause) == "the connector failed; see the cause"
    assert cause.__notes__ == [f"note: the password was {REDACTED}"]
    assert cause.attempted == REDACTED
    low = cause.__cause__
    assert isinstance(low, OSError) and low.errno == 13
    assert str(low) == f"[Errno 13] permission denied for {REDACTED}: '/x/{REDACTED}'"
    assert isinstance(low.__context__, KeyError) and str(low.__context__) == f"'{REDACTED}'"
    assert low.__suppress_context__  # "raise ... from" kept: the context is not printed
    copy = pickle.loads(pickle.dumps(cause))
    assert type(copy).__name__ == "ConnectorFailure" and str(copy) == str(cause)


def test_exception_groups_keep_their_redacted_members(session: mb.Session, caplog: Any) -> None:
    query, _ = run_failing(session, "group", SECRET, caplog)
    group = query.exception().cause
    assert isinstance(group, ExceptionGroup)
    assert [type(e).__name__ for e in group.exceptions] == ["ValueError", "CustomStrError"]
    assert str(group.exceptions[1]) == f"login refused for {REDACTED}"
    rendered = "".join(traceback.format_exception(group))
    assert "ValueError: first " + REDACTED in rendered and "+---------------- 2" in rendered


def test_a_short_secret_is_removed_where_it_stands_alone(session: mb.Session, caplog: Any) -> None:
    query, _ = run_failing(session, "short", SHORT, caplog)
    error = query.exception()
    assert str(error.cause) == f"login {REDACTED} refused by the server"
    assert_clean([str(error), caplog.text, json.dumps(query.recent_progress)], SHORT)


def test_an_error_without_a_secret_is_the_original_object(session: mb.Session) -> None:
    raised: list[BaseException] = []

    def fail(table: pa.Table, batch_id: int) -> None:
        raised.append(ValueError("nothing secret here"))
        raise raised[0]

    frame = session.read_stream.format("secret-source-test").option("password", SECRET).load()
    query = frame.write_stream.foreach_batch(fail).start()
    with pytest.raises(StreamingQueryException, match="nothing secret here"):
        query.await_termination(timeout=20)
    assert query.exception().cause is raised[0]


START_MODES = ["plain", "str", "repr", "url", "chain", "group", "unprintable", "cycle", "base"]


@pytest.mark.parametrize("mode", START_MODES)
def test_start_raises_the_original_type_without_the_secret(session: mb.Session, mode: str) -> None:
    frame = (
        session.read_stream.format("secret-source-test")
        .options(password=SECRET, failMode=mode, failAt=0)
        .load()
    )
    expected = type(failure(mode, "x"))
    with pytest.raises(expected) as caught:
        frame.write_stream.format("noop").start()
    error = caught.value
    assert type(error).__name__ == expected.__name__
    assert_clean(shown_error(error), SECRET)
    assert "in stream_reader" in "".join(traceback.format_exception(error))
    assert error.__context__ is None or not leaks(repr(error.__context__), SECRET)
    assert session.streams.active == []


def test_batch_read_raises_the_original_type_without_the_secret(session: mb.Session) -> None:
    reader = session.read.format("secret-source-test").options(
        password=SECRET, failMode="str", failAt=1
    )
    with pytest.raises(CustomStrError) as caught:
        reader.load()
    assert str(caught.value) == f"login refused for {REDACTED}"
    assert_clean(shown_error(caught.value), SECRET)


@pytest.mark.parametrize("mode", ["str", "chain"])
def test_stream_load_raises_the_original_type_without_the_secret(
    session: mb.Session, mode: str
) -> None:
    reader = session.read_stream.format("secret-probed-test").options(
        password=SECRET, failMode=mode, failAt=0
    )
    with pytest.raises(type(failure(mode, "x"))) as caught:
        reader.load()
    assert_clean(shown_error(caught.value), SECRET)
    assert "in schema" in "".join(traceback.format_exception(caught.value))


def test_a_failing_sink_and_its_abort_show_no_token(
    session: mb.Session, caplog: Any, tmp_path: Path
) -> None:
    frame = session.read_stream.format("secret-source-test").option("password", SECRET).load()
    with caplog.at_level(logging.DEBUG, logger="microbatch"):
        query = frame.write_stream.format("secret-sink-test").options(token=TOKEN, failAt=1)
        running = query.start()
        with pytest.raises(StreamingQueryException) as caught:
            running.await_termination(timeout=20)
    assert "abort of batch 1 failed" in caplog.text
    assert str(caught.value.cause) == f"login refused for {REDACTED}"
    texts = [*shown_error(caught.value), caplog.text, json.dumps(running.recent_progress)]
    assert_clean(texts, TOKEN)
    assert_clean(texts, SECRET)


# -- scrub --------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", forms(SECRET))
def test_scrub_removes_every_printed_form(form: str) -> None:
    cleaned = scrub(f"at <{form}> end", [SECRET])
    assert cleaned.startswith("at <") and REDACTED in cleaned and cleaned.endswith("> end")
    assert not leaks(cleaned, SECRET)


def test_scrub_short_secrets_only_as_whole_tokens() -> None:
    text = "about tab 'ab' password=ab&user=x ab. %3Dab ab_1"
    assert scrub(text, ["ab"]) == (
        f"about tab '{REDACTED}' password={REDACTED}&user=x {REDACTED}. %3D{REDACTED} {REDACTED}_1"
    )
    assert scrub("pin 7 of 17 at line 7", ["7"]) == f"pin {REDACTED} of 17 at line {REDACTED}"


def test_scrub_is_idempotent_and_leaves_the_marker_alone() -> None:
    once = scrub("red alert: red", ["red"])
    assert once == f"{REDACTED} alert: {REDACTED}"
    assert scrub(once, ["red"]) == once


def test_secret_values_of_bytes_cover_both_decodings() -> None:
    spec = OptionSpec(Option(name="key", type="object", secret=True))
    options = spec.parse({"key": "é-key".encode()}, connector="t")
    shown = repr("é-key".encode())
    assert REDACTED in scrub(shown, options.secret_values())
    assert scrub("é-key", options.secret_values()) == REDACTED


def test_scrub_a_long_secret_in_its_printed_forms() -> None:
    key = "-----BEGIN KEY-----\n" + "é/+".join(f"line{i}" for i in range(400)) + "\n-----END-----"
    for form in forms(key):
        cleaned = scrub(f"<{form}>", [key, "other-secret"])
        assert cleaned == f"<{REDACTED}>", form[:40]


# -- redact_error on awkward exceptions -------------------------------------------------------
class NoSubclasses(Exception):
    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("this class cannot be subclassed")


class NeedsTwoArguments(Exception):
    def __new__(cls, first: int, second: int) -> NeedsTwoArguments:
        if not isinstance(first, int):
            raise TypeError("first must be an int")
        return super().__new__(cls, first, second)


def test_redact_error_falls_back_to_a_stand_in_with_the_same_name() -> None:
    for error in (NoSubclasses(f"pw {SECRET}"), NeedsTwoArguments(1, 2)):
        error.add_note(f"with {SECRET}")
        copy = redact_error(error, [SECRET])
        assert type(copy).__name__ == type(error).__name__
        assert_clean(shown_error(copy), SECRET)
    assert str(redact_error(NoSubclasses(f"pw {SECRET}"), [SECRET])) == f"pw {REDACTED}"


def test_redact_error_follows_a_long_chain_without_recursing_forever() -> None:
    error: BaseException = ValueError(f"root {SECRET}")
    for index in range(300):
        wrapper = RuntimeError(f"level {index}")
        wrapper.__cause__ = error
        error = wrapper
    copy = redact_error(error, [SECRET])
    assert_clean(["".join(traceback.format_exception(copy))], SECRET)
    assert str(copy) == "level 299" and isinstance(copy, RuntimeError)


def test_redact_error_keeps_a_clean_error_and_scrubs_odd_attributes() -> None:
    clean = ValueError("nothing to hide")
    assert redact_error(clean, [SECRET]) is clean
    error = ValueError("x")
    error.where = os.path.join("/data", SECRET)  # type: ignore[attr-defined]
    error.pair = os.terminal_size((1, 2))  # type: ignore[attr-defined]
    copy = redact_error(error, [SECRET])
    assert copy.where == os.path.join("/data", REDACTED)  # type: ignore[attr-defined]
    assert copy.pair == (1, 2)  # type: ignore[attr-defined]
