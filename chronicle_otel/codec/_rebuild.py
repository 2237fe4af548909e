"""Rebuilding an instance of an allowed class from its recorded data.

A pydantic model through ``model_construct`` (fields, extras, which were set, private attributes as recorded), a
dataclass through its constructor then its recorded fields set back, a namedtuple as a tuple, an exception from its
recorded args and plain attributes, a pydantic ``ValidationError`` through pydantic's own constructor. When a
constructor refuses the recorded data, the instance is made by a builtin ``__new__``: none of the class's code runs.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import Any, Final, cast

from ._classes import _class_dict_chain


def _rebuilt_validation_error(attrs: Any) -> BaseException | None:
    """A pydantic ``ValidationError`` made from its recorded title and errors, or None.

    Made by pydantic's own public constructor, ``from_exception_data``, from data only; None when pydantic is not
    imported or the data does not fit.

    An error type pydantic does not know (a validator's ``PydanticCustomError``) comes back as a custom error with the
    recorded message.
    """
    core = sys.modules.get("pydantic_core")
    if core is None or type(attrs) is not dict:
        return None
    title, lines = attrs.get("title"), attrs.get("line_errors")
    if type(title) is not str or type(lines) is not list or not all(type(x) is dict for x in lines):
        return None
    details = []
    for line in lines:
        detail: dict[str, Any] = {
            "type": line.get("type"),
            "loc": tuple(line.get("loc") or ()),
            "input": line.get("input"),
        }
        if type(line.get("ctx")) is dict:
            detail["ctx"] = line["ctx"]
        details.append(detail)
    try:
        return cast(BaseException, core.ValidationError.from_exception_data(title, details))
    except Exception:
        pass
    try:  # as custom errors: the recorded type and message
        custom = [
            {
                "type": core.PydanticCustomError(
                    str(x.get("type")), str(x.get("msg", "")).replace("{", "{{").replace("}", "}}")
                ),
                "loc": tuple(x.get("loc") or ()),
                "input": x.get("input"),
            }
            for x in lines
        ]
        return cast(BaseException, core.ValidationError.from_exception_data(title, custom))
    except Exception:
        return None


def _names_field(key: Any, declared: Mapping[str, Any]) -> bool:
    """``key`` names a declared field, by its name or its alias."""
    if key in declared:
        return True
    return any(getattr(field, "alias", None) == key for field in declared.values())


def _needs_fields(cls: Any, declared: Mapping[str, Any]) -> bool:
    """The class cannot be made of extra fields alone: it keeps none, or it has a required field."""
    config = getattr(cls, "model_config", None)
    if not isinstance(config, Mapping) or config.get("extra") != "allow":
        return True
    return any(_required(field) for field in declared.values())


def _required(field: Any) -> bool:
    try:
        return bool(field.is_required())
    except Exception:
        return False


def _construct_model(
    cls: Any, data: dict[str, Any], unset: list[str], private: dict[str, Any], set_extras: list[str] | None = None
) -> Any:
    """The model as it was recorded, rebuilt with ``model_construct``.

    Its fields (by name, also for a field the class names by alias), its extra fields and which fields were set
    (the fields ``data`` names, and the extras in ``set_extras``) come back as recorded. The values were validated
    when the model was made; the class's validators do not run again (a parametrized generic model is recorded as
    its generic class, whose type variables would refuse the values its parameters allowed).
    """
    skip = set(unset)  # filled in with their defaults, as when recorded; passing them would mark them set
    declared = getattr(cls, "model_fields", None) or {}
    if declared and data and not any(_names_field(key, declared) for key in data) and _needs_fields(cls, declared):
        # not one recorded field is a field of the class: the recording names another class (a trace edited to name
        # a class it was not made of) — an object of the class with none of its fields set would be handed over
        raise TypeError(f"none of the recorded fields ({', '.join(sorted(map(str, data))[:5])}) is a field of it")
    values: dict[str, Any] = {}
    aliases: list[str] = []
    for key, val in data.items():
        if type(key) is not str or key in skip:
            continue
        alias = getattr(declared.get(key), "alias", None)
        if type(alias) is str and alias and alias not in declared and alias not in data:
            # a field the class names by alias (``schema_`` for ``schema``) is given by its alias: model_construct
            # takes the name only under populate_by_name
            values[alias] = val
            aliases.append(alias)
        else:
            values[key] = val
    model = cls.model_construct(**values)
    if aliases:  # a construct that took the alias for the field and kept it as an extra too (the OpenAI SDK's)
        extra = getattr(model, "__pydantic_extra__", None)
        if isinstance(extra, dict):
            for alias in aliases:
                extra.pop(alias, None)
    if set_extras:
        fields_set = object.__getattribute__(model, "__pydantic_fields_set__")
        object.__setattr__(model, "__pydantic_fields_set__", fields_set | {k for k in set_extras if k in data})
    if private:
        declared = getattr(cls, "__private_attributes__", None) or {}
        store = getattr(model, "__pydantic_private__", None)
        namespace = object.__getattribute__(model, "__dict__")
        class_names = _class_dict_chain(cls)
        for key, value in private.items():
            if type(key) is not str or not key.startswith("_") or key.startswith("__"):
                continue
            if key in declared and isinstance(store, dict):
                store[key] = value  # a declared private attribute, in pydantic's private dict
            elif key not in class_names and isinstance(namespace, dict):
                namespace[key] = value  # an instance attribute that shadows nothing of the class
    return model


def _construct(tag: str, cls: Any, data: dict[str, Any]) -> Any:
    if tag == "namedtuple":
        fields = cls._fields
        if set(data) != set(fields):
            raise TypeError(f"fields {sorted(map(str, data))} do not match {list(fields)}")
        return tuple.__new__(cls, [data[f] for f in fields])  # no user code runs: the tuple is built as is
    # Made as the code made it (its __post_init__ derives the state the fields do not hold), then every field set
    # back to its recorded value: a __post_init__ that changes a field (a prefix added) does not change it twice.
    # One that cannot run again (an InitVar is never stored) is skipped: the fields alone, as recorded.
    fields = dataclasses.fields(cls)
    missing = dataclasses.MISSING
    for f in fields:  # a field added to the class since the recording takes its default; one without, no value
        if f.name not in data and f.default is missing and f.default_factory is missing:
            raise TypeError(f"the recording has no value for the field {f.name!r}")
    try:
        obj = cls(**{f.name: data[f.name] for f in fields if f.init and f.name in data})
    except Exception:
        obj = _blank(cls)
        for f in fields:
            if f.name not in data:
                default = f.default if f.default is not missing else f.default_factory()  # type: ignore[operator]
                object.__setattr__(obj, f.name, default)
    for f in fields:
        if f.name in data:
            object.__setattr__(obj, f.name, data[f.name])  # as the generated __init__ does, frozen or with slots
    return obj


_ARGS: Final[Any] = BaseException.__dict__["args"]
"""The ``args`` slot of every exception, set without the class's own ``__setattr__``."""


def _blank(cls: type, args: tuple[Any, ...] = ()) -> Any:
    """An instance of ``cls`` made by the nearest builtin ``__new__`` of its bases: none of its own code runs.

    For a class whose constructor refuses the recorded data.
    """
    for base in cls.__mro__:
        if base.__module__ == "builtins" and "__new__" in base.__dict__:
            return base.__new__(cls, *args)
    raise TypeError(f"{cls.__qualname__} has no builtin base to make it from")  # pragma: no cover - object is one


def _restore_attrs(obj: Any, attrs: dict[str, Any]) -> None:
    """Put back the recorded plain attributes, into the instance dict directly: no descriptor or __setattr__ runs."""
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return
    if type(namespace) is dict:
        for key, value in attrs.items():
            if type(key) is str and not key.startswith("_"):
                namespace[key] = value
