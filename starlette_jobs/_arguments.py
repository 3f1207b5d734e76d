"""A job function's parameters as a pydantic model: arguments checked at enqueue, stored as
JSON, and validated back into the function's own types when the job runs."""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pydantic

from ._errors import JobArgumentsError, JobDefinitionError

# Made once: json.dumps with options builds a new encoder on every call.
_ENCODE_JSON = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


class ArgumentsModel:
    """A pydantic model of a function's parameters, built once per job.

    Fields get internal names with the parameter names as aliases, so a parameter called
    `json` or `copy` cannot clash with pydantic's own attributes.
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
            default = ... if parameter.default is parameter.empty else parameter.default
            fields[field_name] = (
                hints.get(parameter.name, Any),
                pydantic.Field(default, alias=parameter.name),
            )
        config = pydantic.ConfigDict(
            extra="forbid",
            allow_inf_nan=False,
            validate_by_name=False,
            # Keep NaN/infinity as floats in untyped values, so json.dumps(allow_nan=False)
            # refuses them instead of pydantic's default of storing null in their place.
            ser_json_inf_nan="constants",
        )
        self.model: type[pydantic.BaseModel] = pydantic.create_model(
            "JobArguments", __config__=config, **fields
        )
        self._many: pydantic.TypeAdapter[list[pydantic.BaseModel]] | None = None
        self._validate = self.model.__pydantic_validator__.validate_python
        self._to_json = self.model.__pydantic_serializer__.to_json
        self._validate_json = self.model.__pydantic_validator__.validate_json

    def _bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return dict(self.signature.bind_partial(*args, **kwargs).arguments)
        except TypeError as error:
            raise JobArgumentsError(
                self.job_name, [{"loc": (), "msg": str(error), "type": "arguments"}]
            ) from None

    def serialize(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str:
        arguments = self._bind(args, kwargs) if args else kwargs
        # The common case in two calls into pydantic-core. NaN and infinity come out as bare
        # constants here (not JSON): they, and anything that fails, take the checked path below,
        # which refuses them with the error to show.
        try:
            validated = self._validate(arguments)
            text = self._to_json(validated, by_alias=True, include=validated.model_fields_set)
        except (pydantic.ValidationError, ValueError, TypeError):
            pass
        else:
            if b"NaN" not in text and b"Infinity" not in text:
                return text.decode()
        return self._serialize_checked(arguments)

    def _serialize_checked(self, arguments: Mapping[str, Any]) -> str:
        try:
            validated = self.model.model_validate(arguments)
            # Only the arguments the caller gave are stored: defaults of the function's own
            # parameters are applied when the job runs, so a changed default reaches queued jobs.
            # Nested models are stored whole (a default_factory value made now is kept).
            plain = validated.model_dump(
                mode="json", by_alias=True, include=set(validated.model_fields_set)
            )
            return _ENCODE_JSON(plain)
        except pydantic.ValidationError as error:
            raise JobArgumentsError(self.job_name, _plain_errors(error)) from None
        except (ValueError, TypeError) as error:
            # json.dumps refuses NaN/infinity nested in untyped values; pydantic refuses
            # values it cannot serialize at all.
            raise JobArgumentsError(
                self.job_name,
                [{"loc": (), "msg": f"not storable as JSON: {error}", "type": "json"}],
            ) from None

    def serialize_batch(self, items: Sequence[Mapping[str, Any]]) -> list[str] | None:
        """`serialize` for many items in one pydantic call, when every item is a dict with the
        same keys (then one `include` fits all). None when that does not hold or anything is
        wrong: `serialize` item by item then says what, and where."""
        keys = items[0].keys()
        for item in items:
            if type(item) is not dict or item.keys() != keys:
                return None
        try:
            given = {self.field_of_parameter[name] for name in keys}
        except KeyError:
            return None
        if self._many is None:
            # Built on the first batch, not at declaration: most jobs never see one.
            self._many = pydantic.TypeAdapter(list[self.model])  # type: ignore[name-defined]
        to_json = self._to_json
        try:
            # Each model straight to JSON, as `serialize` does: one call per item, no dicts.
            texts = [
                to_json(validated, by_alias=True, include=given).decode()
                for validated in self._many.validate_python(items)
            ]
        except (pydantic.ValidationError, ValueError, TypeError):
            return None
        # NaN and infinity come out as bare constants, which is not JSON: `serialize` refuses
        # them. A string that merely holds these words also takes the slow path, which is right.
        if any("NaN" in text or "Infinity" in text for text in texts):
            return None
        return texts

    def parse(self, payload: str) -> dict[str, Any]:
        try:
            validated = self._validate_json(payload)
        except pydantic.ValidationError as error:
            raise JobArgumentsError(self.job_name, _plain_errors(error)) from None
        values = validated.__dict__
        return {parameter: values[field] for parameter, field in self.field_of_parameter.items()}


def _plain_errors(error: pydantic.ValidationError) -> list[dict[str, Any]]:
    # include_url and include_context would make the errors noisy and not JSON-serializable.
    return [dict(e) for e in error.errors(include_url=False, include_context=False)]
