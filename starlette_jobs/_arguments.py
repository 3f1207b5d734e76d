"""A job function's parameters as a pydantic schema: arguments checked at enqueue, stored as
JSON, and validated back into the function's own types when the job runs."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired

import pydantic
import pydantic_core
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from ._errors import JobArgumentsError, JobDefinitionError
from ._storable import (
    MASKED_SECRET,
    MAX_DEPTH,
    REPLACEMENT_CHARACTER,
    any_may_be_unstorable,
    json_problems,
    may_be_unstorable,
    python_non_finite,
    python_secrets,
    python_text_problems,
)


class ArgumentsSchema:
    """A function's parameters as a pydantic schema, built once per job.

    The schema is a TypedDict rather than a model: it validates to plain dicts, which makes
    enqueueing three times cheaper than building a model instance per call, and a batch five
    times cheaper (dicts of plain values are no work for the garbage collector). A TypedDict
    also holds only the keys given, which is what is stored: defaults of the function's own
    parameters apply when the job runs, so a changed default reaches queued jobs.

    Keys get internal names with the parameter names as aliases, so that no parameter name
    can clash with a name pydantic gives a meaning to.
    """

    def __init__(self, func: Callable[..., Any], job_name: str) -> None:
        self.job_name = job_name
        self.signature = inspect.signature(func)
        try:
            hints = typing.get_type_hints(func, include_extras=True)
        except Exception as error:
            raise JobDefinitionError(
                f"cannot resolve the type annotations of job {job_name!r}: {error}"
            ) from error
        fields: dict[str, Any] = {}
        self.field_of_parameter: dict[str, str] = {}
        for index, parameter in enumerate(self.signature.parameters.values()):
            if parameter.kind not in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
                raise JobDefinitionError(
                    f"job {job_name!r}: parameter {parameter.name!r} is "
                    f"{parameter.kind.description}; jobs take named parameters only, so that "
                    "stored arguments stay readable"
                )
            field_name = f"p{index}"
            self.field_of_parameter[parameter.name] = field_name
            hint: Any = Annotated[  # built at run time: mypy cannot follow it, nor need to
                _json_values_for_any(hints.get(parameter.name, Any)),
                pydantic.Field(alias=parameter.name),
            ]
            fields[field_name] = hint if parameter.default is parameter.empty else NotRequired[hint]
        self._schema = pydantic.with_config(
            pydantic.ConfigDict(extra="forbid", allow_inf_nan=False, validate_by_name=False)
        )(TypedDict("JobArguments", fields))  # type: ignore[operator]
        adapter = pydantic.TypeAdapter(self._schema)
        lost = _lost_in_storage(adapter.core_schema, self.field_of_parameter)
        if lost is not None:
            raise JobDefinitionError(f"job {job_name!r}: {lost}")
        self._validate = adapter.validator.validate_python
        self._validate_json = adapter.validator.validate_json
        # Our own serializer, to keep NaN and infinity in untyped values as floats (pydantic's
        # default stores null in their place): in JSON text they then show as bare constants,
        # which `serialize` refuses. A TypedDict's own config does not reach its `Any` fields.
        serializer = pydantic_core.SchemaSerializer(
            adapter.core_schema, pydantic_core.CoreConfig(ser_json_inf_nan="constants")
        )
        self._to_json = serializer.to_json
        self._to_python = serializer.to_python
        self._validate_many: Callable[[Any], list[dict[str, Any]]] | None = None
        self._parameter_of_field = {field: name for name, field in self.field_of_parameter.items()}
        self._parse_json = _keyed_by_parameter(adapter.core_schema, self._parameter_of_field)
        # A pydantic model (or dataclass) among the parameters' types keeps its own settings:
        # it takes NaN and infinity, and writes them as null, which the text then cannot show.
        # Where one is, a text with a null takes the checked path, which looks at the values.
        self._may_hide_non_finite = _has_own_settings(adapter.core_schema)

    def _bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return dict(self.signature.bind_partial(*args, **kwargs).arguments)
        except TypeError as error:
            raise JobArgumentsError(
                self.job_name, [{"loc": (), "msg": str(error), "type": "arguments"}]
            ) from None

    def serialize(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        arguments = self._bind(args, kwargs) if args else kwargs
        # The common case in two calls into pydantic-core and a few substring searches. What
        # PostgreSQL or the worker could not take (NaN, NUL, lone surrogates, deep nesting,
        # huge integers) shows in the JSON text: it, and anything that fails, takes the checked
        # path below, which refuses it with the error to show.
        try:
            text = self._to_json(self._validate(arguments), by_alias=True)
        except (pydantic.ValidationError, ValueError, TypeError):
            pass
        else:
            if (
                not may_be_unstorable(text, _ARGUMENTS_LEVELS)
                and not self._may_hide(text)
                and MASKED_SECRET not in text
            ):
                return text.decode()
        return self._serialize_checked(arguments)

    def _may_hide(self, text: bytes) -> bool:
        """Whether a null in `text` may stand for a NaN or an infinity (see `__init__`)."""
        return self._may_hide_non_finite and b"null" in text

    def _serialize_checked(self, arguments: Mapping[str, Any]) -> str:
        try:
            validated = self._validate(arguments)
        except pydantic.ValidationError as error:
            raise JobArgumentsError(self.job_name, _plain_errors(error)) from None
        try:
            # Nested models are stored whole (a default_factory value made now is kept).
            text = self._to_json(validated, by_alias=True)
        except (ValueError, TypeError) as error:
            # A lone surrogate in a dict key cannot even be encoded: say where it is.
            try:
                plain = self._to_python(validated, by_alias=True)
                problems = list(python_text_problems(plain))
            except (ValueError, TypeError, RecursionError):
                problems = []
            if problems:
                raise JobArgumentsError(self.job_name, _problem_errors(problems)) from None
            # pydantic refuses values it cannot serialize at all.
            raise JobArgumentsError(
                self.job_name,
                [{"loc": (), "msg": f"not storable as JSON: {error}", "type": "json"}],
            ) from None
        problems = json_problems(text, top_level_keys=True)
        if REPLACEMENT_CHARACTER in text:
            # pydantic-core writes a lone surrogate in the key of a typed dict as replacement
            # characters: the text no longer shows it, the values themselves do.
            problems += python_text_problems(self._to_python(validated, by_alias=True))
        if self._may_hide(text):
            problems += python_non_finite(self._to_python(validated, by_alias=True))
        if MASKED_SECRET in text:
            problems += python_secrets(self._to_python(validated, by_alias=True))
        if problems:
            raise JobArgumentsError(self.job_name, _problem_errors(problems))
        return text.decode()

    def serialize_batch(self, items: Sequence[Mapping[str, Any]]) -> list[str] | None:
        """`serialize` for many items with one pydantic call to validate them all. None when
        anything is wrong: `serialize` item by item then says what, and where."""
        if self._validate_many is None:
            # Built on the first batch, not at declaration: most jobs never see one.
            many = pydantic.TypeAdapter(list[self._schema])  # type: ignore[name-defined]
            self._validate_many = many.validator.validate_python
        to_json = self._to_json
        try:
            texts = [to_json(validated, by_alias=True) for validated in self._validate_many(items)]
        except (pydantic.ValidationError, ValueError, TypeError):
            return None
        # What `serialize` would refuse shows in the text (a string that merely holds "NaN", say,
        # also takes the slow path, which is right).
        if (
            any_may_be_unstorable(texts, _ARGUMENTS_LEVELS)
            or any(map(self._may_hide, texts))
            or any(MASKED_SECRET in text for text in texts)
        ):
            return None
        return [text.decode() for text in texts]

    def parse(self, payload: str) -> dict[str, Any]:
        """The stored JSON validated back into the function's types, keyed by parameter; the
        parameters not stored are left out, for the function's defaults to apply."""
        parse_json = self._parse_json
        try:
            if parse_json is not None:
                return parse_json(payload)
            validated = self._validate_json(payload)
        except pydantic.ValidationError as error:
            raise JobArgumentsError(self.job_name, _plain_errors(error)) from None
        parameter_of_field = self._parameter_of_field
        return {parameter_of_field[field]: value for field, value in validated.items()}


def _keyed_by_parameter(
    schema: Any, parameter_of_field: Mapping[str, str]
) -> Callable[[str], dict[str, Any]] | None:
    """A validator of the stored JSON that is the schema's own, field for field (each reads
    the same alias, with the same checks), but whose fields are named after the parameters:
    the dicts it makes are the keyword arguments as they are, where renaming the keys of each
    cost more than validating them (0.27 us of 0.51 per job, for one argument). None if the
    schema is not the shape this expects: `parse` renames the keys then."""
    outer = schema
    if outer.get("type") == "definitions":
        schema = outer["schema"]
    if schema.get("type") != "typed-dict" or set(schema["fields"]) != set(parameter_of_field):
        return None
    fields = {parameter_of_field[name]: field for name, field in schema["fields"].items()}
    renamed = {**schema, "fields": fields}
    if outer is not schema:
        renamed = {**outer, "schema": renamed}
    try:
        return pydantic_core.SchemaValidator(renamed).validate_json
    except pydantic_core.SchemaError:
        return None


# The arguments object, then up to MAX_DEPTH levels inside each argument.
_ARGUMENTS_LEVELS = MAX_DEPTH + 1


def _lost_in_storage(schema: Any, field_of_parameter: Mapping[str, str]) -> str | None:
    """What among the parameters' types (the arguments' core `schema`) would not come back
    from the JSON stored, said for the declaration to refuse; None when all would. A value of
    such a type validates at enqueue, and then fails every attempt in the worker."""
    definitions = schema.get("definitions", []) if schema.get("type") == "definitions" else []
    fields = (schema["schema"] if definitions else schema).get("fields", {})
    for name, field in field_of_parameter.items():
        reason = _first_lost(fields.get(field))
        if reason is not None:
            return f"parameter {name!r}: {reason}"
    reason = _first_lost(definitions)  # the models that refer to themselves
    return None if reason is None else f"a model among its parameters' types: {reason}"


def _first_lost(schema: Any) -> str | None:
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "json":
            return (
                "a Json[...] value is stored as the value it parses to, which does not "
                "validate as JSON text again; declare the parsed type (Json[list[int]]: "
                "list[int])"
            )
        if kind == "dict" and schema.get("keys_schema", {}).get("type") in _KEYS_NOT_TEXT:
            return (
                "a dict whose keys are tuples, lists or sets is stored with keys made text "
                "('1,2'), which do not validate as keys again; use str or int keys"
            )
        return next(filter(None, map(_first_lost, schema.values())), None)
    if isinstance(schema, list):
        return next(filter(None, map(_first_lost, schema)), None)
    return None


# Core schema types of dict keys that pydantic writes as text and cannot read back.
_KEYS_NOT_TEXT = frozenset({"tuple", "list", "set", "frozenset"})


def _has_own_settings(schema: Any) -> bool:
    """Whether a core schema holds a model or dataclass with settings of its own."""
    if isinstance(schema, dict):
        if schema.get("type") in ("model", "dataclass") and "config" in schema:
            return True
        return any(_has_own_settings(value) for value in schema.values())
    if isinstance(schema, list):
        return any(_has_own_settings(value) for value in schema)
    return False


def _json_values_for_any(hint: Any) -> Any:
    """`hint` with `Any` (also inside lists, dicts, unions and `Annotated`) made
    `pydantic.JsonValue`: an untyped value must be a plain JSON value, since nothing would turn
    it back into what it was (bytes would come back as a str, a set or a tuple as a list)."""
    if hint is Any or hint is object:  # pydantic takes `object` as `Any`
        return pydantic.JsonValue
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if not args:
        return hint
    if origin is Annotated:
        return Annotated[(_json_values_for_any(args[0]), *hint.__metadata__)]
    if origin in (typing.Union, types.UnionType):
        return typing.Union[tuple(_json_values_for_any(arg) for arg in args)]  # noqa: UP007
    if origin in _CONTAINERS:
        return origin[tuple(_json_values_for_any(arg) for arg in args)]
    return hint


# Generic containers whose `Any` arguments are checked; any other generic is left as declared.
_CONTAINERS = frozenset({list, dict, Sequence, Mapping})


def _problem_errors(problems: list[tuple[tuple[Any, ...], str]]) -> list[dict[str, Any]]:
    return [{"loc": loc, "msg": reason, "type": "unstorable"} for loc, reason in problems]


def _plain_errors(error: pydantic.ValidationError) -> list[dict[str, Any]]:
    # include_url and include_context would make the errors noisy and not JSON-serializable.
    return [
        _without_outer_input(dict(e))
        for e in error.errors(include_url=False, include_context=False)
    ]


def _without_outer_input(error: dict[str, Any]) -> dict[str, Any]:
    """`error` with no input if nothing was at its location: pydantic gives a missing field the
    whole mapping it is missing from, which holds the other arguments, the ones a server added
    to a client's (`enqueue(**body, signing_key=...)`) too, and errors go back to clients."""
    if error["type"] in _MISSING:
        error["input"] = None
    return error


# pydantic's error types for a field, or a function's argument, that was not given.
_MISSING = frozenset(
    {
        "missing",
        "missing_argument",
        "missing_keyword_only_argument",
        "missing_positional_only_argument",
    }
)
