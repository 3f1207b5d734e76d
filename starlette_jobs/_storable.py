"""What PostgreSQL can store and Python can read back: the limits that `enqueue` enforces on
arguments and options, and the worker on error texts, results and progress.

PostgreSQL text and jsonb refuse NUL characters and lone surrogates. Reading JSON back has its
own limits: pydantic-core's parser (the worker) refuses nesting deeper than about 200 levels,
and both it and `json.loads` (`jobs.get`) refuse integers of more than 4,300 digits. The
bounds here sit inside all of them, so that whatever is stored can be run and read back.

Sizes are bounded too, and far inside jsonb's 256 MiB: a value a worker writes goes in a
statement with other jobs' outcomes (or progress), under a statement timeout as short as a third
of the lease; a value large enough to make that statement slow would hold the others back with
it. Each bound is checked where the value is made, the same whichever store runs the job.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import pydantic
import pydantic_core

MAX_DEPTH = 64
"""How deep lists and dicts may nest inside one argument (or one result)."""

MAX_INT_DIGITS = 4300
"""The most digits an integer may have: Python's default limit for converting text to int."""

NON_FINITE = "NaN and infinity are not storable as JSON"

MAX_DELAY = 10 * 365 * 24 * 3600.0
"""The longest delay, retry delay or timeout, in seconds (10 years): far inside what a
PostgreSQL interval or timestamp holds, and far beyond any sensible wait."""

MAX_UNIQUE_KEY_LENGTH = 512
"""The longest `unique_key`, in characters: at 4 bytes each in UTF-8, well within the 2,704
bytes PostgreSQL allows a row of the unique index."""

MAX_PROGRESS_BYTES = 64 * 1024
"""The largest progress, in bytes of JSON (64 KiB). Progress is a status to show (a fraction,
counts, a stage): it is written up to twice a second for each running job, and sent to every
client watching the job's event stream each time it changes. Far more than any status needs,
and small enough that the progress of a thousand jobs fits in a statement of a worker."""

MAX_RESULT_BYTES = 1024 * 1024
"""The largest result, in bytes of JSON (1 MiB): the default bound on a job's arguments
(`max_payload_bytes`). A result is what a caller waits for (an id, a URL, a summary); bulk
output belongs in the app's own tables or storage, with the key to it as the result."""

MAX_ERROR_LENGTH = 8000
"""The longest error text kept of a failed attempt, in characters (its end: the exception and
the innermost frames say the most)."""

MAX_KEPT_ERRORS = 100
"""How many entries a job's `errors` keeps: the latest attempts'. Each outcome rewrites the row,
and a job retried without end (`max_attempts` goes up to 2**31 - 1) would otherwise grow it by
up to 8,000 characters an attempt, until every write of it ran slow and then was refused. The
SQL in postgres/sql/queries.sql says 100 too; tests/contract pins both."""

MAX_OUTCOME_LENGTH = MAX_RESULT_BYTES + MAX_PROGRESS_BYTES + 2 * MAX_ERROR_LENGTH
"""The most characters of values (result, progress, error) one outcome can hold when every
value is within its bound (a character is at least a byte), with room for a prefix to the
error. The outcome writer strips an outcome that holds more rather than send it."""

MAX_STATEMENT_LENGTH = 2 * 1024 * 1024
"""The most characters of values one outcome or progress statement carries (one outcome alone
may hold up to `MAX_OUTCOME_LENGTH`): values within their bounds but many at once (a thousand
jobs ending together, each with a large result) are written in several statements, so that
none takes long enough to run into the statement timeout and be retried as an outage."""

REPLACEMENT_CHARACTER = "\ufffd".encode()
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# A run of digits too long for an integer to read back; the look-behind starts a match only where
# a run starts, which keeps the search linear in the length of the text.
_LONG_DIGIT_RUN = re.compile(rb"(?<![0-9])[0-9]{%d}" % (MAX_INT_DIGITS + 1))


def unstorable(text: str) -> str | None:
    """Why PostgreSQL would refuse `text`, or None when it stores it."""
    if "\x00" in text:
        return "holds a NUL character (\\x00), which PostgreSQL cannot store"
    if not text.isascii() and (found := _LONE_SURROGATE.search(text)) is not None:
        return (
            f"holds a lone surrogate ({ascii(found.group())[1:-1]}), which is not valid "
            "Unicode and which PostgreSQL cannot store"
        )
    return None


def filter_text(value: str | None, what: str) -> None:
    """Refuses a filter's text that PostgreSQL cannot take (a NUL character, a lone surrogate),
    on both stores alike: no job could match it.

    Raises:
        ValueError: it names why.
    """
    if value is not None and (why := unstorable(value)) is not None:
        raise ValueError(f"{what} {value!r} {why}")


def storable(text: str) -> str:
    """`text` with NUL characters and lone surrogates written as escapes, for text we write
    ourselves (error messages, ids) and would rather keep than refuse."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if not text.isascii():
        text = _LONE_SURROGATE.sub(lambda found: ascii(found.group())[1:-1], text)
    return text


# What pydantic-core writes for NaN and infinity (bare constants, not JSON), and for NUL and
# lone surrogates (`\\u` escapes: it writes every other character as itself), except in the
# keys of typed dicts, where it writes a lone surrogate as U+FFFD replacement characters. One
# search: each `in` costs as much as the whole of it.
_SUSPECT = re.compile(rb"NaN|Infinity|\\u(?:0000|[dD])|" + REPLACEMENT_CHARACTER).search


def may_be_unstorable(text: bytes, levels: int = MAX_DEPTH) -> bool:
    """A cheap test of JSON text from pydantic-core: False means it is storable and readable.

    `levels` is how deep the text may nest (one more than `MAX_DEPTH` for an object holding
    arguments). True may be a false alarm (a string that holds `NaN`, or a backslash and
    `u0000`): `json_problems` then says for sure.
    """
    return _SUSPECT(text) is not None or _too_deep_or_huge(text, levels)


def any_may_be_unstorable(texts: list[bytes], levels: int = MAX_DEPTH) -> bool:
    """`may_be_unstorable` for many texts: one search through them all (no pattern can span
    two texts of JSON objects), and a look at the brackets and digits of the long ones."""
    if _SUSPECT(b"".join(texts)) is not None:
        return True
    # Short texts (the usual batch) cannot be too deep: no call per text then.
    return max(map(len, texts)) > 2 * levels and any(
        _too_deep_or_huge(text, levels) for text in texts
    )


def _too_deep_or_huge(text: bytes, levels: int) -> bool:
    size = len(text)
    # Nesting deeper than `levels` takes more than twice as many brackets.
    if size <= 2 * levels:
        return False
    if text.count(b"[") + text.count(b"{") > levels and _deeper_than(text, levels):
        return True
    return size > MAX_INT_DIGITS and _LONG_DIGIT_RUN.search(text) is not None


_NOT_A_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
# Depth does not care which kind a bracket is: one kind, so that one replace is one level.
_ONE_KIND = bytes.maketrans(b"{}", b"[]")


def _deeper_than(text: bytes, levels: int) -> bool:
    """Whether JSON `text` nests deeper than `levels`, without a call per character: with the
    strings gone and only brackets left, each pass takes away the innermost pairs, so the
    text is gone after as many passes as it is deep. Many small lists or dicts side by side
    (a common payload) are no false alarm this way."""
    if b"\\" in text:
        # Escaped backslashes first: what is left of `\"` then is a quote inside a string.
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside_strings = b"".join(text.split(b'"')[::2])
    brackets = outside_strings.translate(_ONE_KIND, _NOT_A_BRACKET)
    for _ in range(levels):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return bool(brackets)


class _HugeInt:
    """An integer too long to convert, kept as its text."""

    def __init__(self, digits: str) -> None:
        self.digits = digits


def _parse_int(digits: str) -> int | _HugeInt:
    return _HugeInt(digits) if len(digits.lstrip("-")) > MAX_INT_DIGITS else int(digits)


def json_problems(text: bytes | str, *, top_level_keys: bool) -> list[tuple[tuple[Any, ...], str]]:
    """Every value in JSON `text` that cannot be stored or read back, as (location, reason).

    With `top_level_keys`, the text is an object whose values are checked one by one (the
    arguments of a job: the depth bound applies to each), else it is one value.
    """
    parsed = json.loads(text, parse_int=_parse_int)
    if top_level_keys and isinstance(parsed, dict):
        return [
            problem
            for key, value in parsed.items()
            for problem in _problems(value, (key,), MAX_DEPTH, (key,))
        ]
    return list(_problems(parsed, (), MAX_DEPTH, ()))


def _problems(
    value: Any, loc: tuple[Any, ...], depth_left: int, root: tuple[Any, ...]
) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        reason = unstorable(value)
        if reason is not None:
            yield loc, reason
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield loc, NON_FINITE
    elif isinstance(value, _HugeInt):
        yield loc, f"an integer of more than {MAX_INT_DIGITS} digits cannot be read back"
    elif isinstance(value, dict | list):
        if depth_left == 0:
            # Said of the whole value: the path down to here would be 64 steps long.
            yield root, f"nested deeper than {MAX_DEPTH} levels of lists and dicts"
            return
        if isinstance(value, dict):
            for key, item in value.items():
                reason = unstorable(key)
                if reason is not None:
                    yield loc, f"a key {reason}"
                yield from _problems(item, (*loc, key), depth_left - 1, root)
        else:
            for index, item in enumerate(value):
                yield from _problems(item, (*loc, index), depth_left - 1, root)


def python_text_problems(
    value: Any, loc: tuple[Any, ...] = ()
) -> Iterator[tuple[tuple[Any, ...], str]]:
    """NUL characters and lone surrogates in the strings and keys of plain Python containers:
    where a value that cannot even be written as JSON text holds them."""
    if len(loc) > MAX_DEPTH:  # too deep to store anyway, or a value that holds itself
        return
    if isinstance(value, str):
        reason = unstorable(value)
        if reason is not None:
            yield loc, reason
    elif isinstance(value, dict):
        for key, item in value.items():
            reason = unstorable(key) if isinstance(key, str) else None
            if reason is not None:
                yield loc, f"a key {reason}"
            yield from python_text_problems(item, (*loc, key))
    elif isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            yield from python_text_problems(item, (*loc, index))


def python_non_finite(
    value: Any, loc: tuple[Any, ...] = ()
) -> Iterator[tuple[tuple[Any, ...], str]]:
    """NaN and infinity among the floats of plain Python containers: where a value whose JSON
    text shows them as null (a pydantic model's own serialization) holds them."""
    if len(loc) > MAX_DEPTH:
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            yield loc, NON_FINITE
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from python_non_finite(item, (*loc, key))
    elif isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            yield from python_non_finite(item, (*loc, index))


# What pydantic writes in place of a secret (`SecretStr`, `SecretBytes`, `Secret[...]`): its
# value is hidden, so that it would be lost, not stored. Seen in a text, the values are looked at.
MASKED_SECRET = b'"**********"'
_SECRETS = (pydantic.SecretStr, pydantic.SecretBytes, pydantic.Secret)
_SECRET_ADVICE = (
    "so its value would be lost; use what finds the secret (its name in your secret store), "
    "or a str if it may be stored in plain text"
)


def python_secrets(value: Any, loc: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """The pydantic secrets among plain Python containers and models: where a JSON text shows
    `MASKED_SECRET`, whether it stands for a value pydantic hid."""
    if len(loc) > MAX_DEPTH:
        return
    if isinstance(value, _SECRETS):
        kind = type(value).__name__
        yield loc, f"a {kind}: pydantic writes a secret as '**********', {_SECRET_ADVICE}"
    elif isinstance(value, dict | pydantic.BaseModel):  # a model: a result as returned
        for key, item in dict(value).items():
            yield from python_secrets(item, (*loc, key))
    elif isinstance(value, list | tuple | set | frozenset):
        for index, item in enumerate(value):
            yield from python_secrets(item, (*loc, index))


def storable_json(value: object, max_bytes: int) -> bytes:
    """`value` as JSON text that PostgreSQL can store and Python can read back, of at most
    `max_bytes` bytes: what a job returns, or reports as its progress.

    Raises:
        ValueError: `value` is not JSON (the message says why), is larger than `max_bytes`
            (the message says how large), or holds what cannot be stored or read back (NUL, a
            lone surrogate, nesting deeper than 64 levels, an integer of more than 4,300
            digits): the message names where, as `key.0.key`.
    """
    try:
        text = pydantic_core.to_json(value)
    except (pydantic_core.PydanticSerializationError, ValueError) as error:
        # A lone surrogate cannot even be encoded: say where it is rather than how it failed.
        _refuse(list(python_text_problems(value)))
        _refuse([(_unserializable_at(value), f"not JSON: {error}")])
    if len(text) > max_bytes:
        # First: the cheapest test, and the one that spares scanning a huge text.
        raise ValueError(f"{len(text):,} bytes of JSON, over the limit of {max_bytes:,} bytes")
    if may_be_unstorable(text):
        problems = json_problems(text, top_level_keys=False)
        if REPLACEMENT_CHARACTER in text:
            # A lone surrogate in a dict key is written as replacement characters.
            problems += python_text_problems(value)
        _refuse(problems)
    if MASKED_SECRET in text:
        _refuse(list(python_secrets(value)))
    return text


def _unserializable_at(value: Any) -> tuple[Any, ...]:
    """Where in `value`, which JSON cannot hold, the part it cannot hold is: the first item of
    a list or dict that fails alone, followed down. Only on the way to an error, so trying
    each item again costs nothing that matters."""
    loc: tuple[Any, ...] = ()
    on_the_way = {id(value)}  # a value that holds itself fails at every step: stop there
    while isinstance(value, dict | list | tuple) and len(loc) <= MAX_DEPTH:
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            try:
                pydantic_core.to_json(item)
            except (pydantic_core.PydanticSerializationError, ValueError):
                loc, value = (*loc, key), item
                break
        else:
            break  # none fails alone: a key of a dict, say
        if id(value) in on_the_way:
            break
        on_the_way.add(id(value))
    return loc


def _refuse(problems: list[tuple[tuple[Any, ...], str]]) -> None:
    if problems:
        loc, reason = problems[0]
        where = ".".join(str(part) for part in loc) or "(the value)"
        raise ValueError(f"{where}: {reason}")
