"""Value classes for the modules every envyard process imports, without `dataclasses`.

The store's records, the sandbox spec, limits and results are loaded by every `envyard run`. As dataclasses
they cost about a fifth of that command's 50 ms: importing `dataclasses` pulls in inspect, ast, dis and
tokenize, and each decorated class is built by compiling generated source. So these few classes write their
own `__init__`, and `Record` gives them the rest of what the decorator did. Everything else keeps dataclasses.

A record's fields are its `__init__`'s parameters, in order (no *args/**kwargs). A frozen record refuses
attribute assignment (its `__init__` sets fields with `_set`) and is hashable; a plain one is not hashable,
as a dataclass with eq=True is not.
"""

from __future__ import annotations


class Record:
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, frozen: bool = False, **kwargs):
        super().__init_subclass__(**kwargs)
        code = cls.__init__.__code__
        cls._fields = code.co_varnames[1:code.co_argcount + code.co_kwonlyargcount]
        if frozen:
            cls.__setattr__ = _refuse_assignment
            cls.__delattr__ = _refuse_assignment
            cls.__hash__ = _hash_fields
        else:
            cls.__hash__ = None

    def _set(self, **values) -> None:
        """Set fields of a frozen record (in its __init__)."""
        self.__dict__.update(values)

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def replace(self, **changes) -> "Record":
        """A copy with some fields changed (what dataclasses.replace does)."""
        return type(self)(**{**{f: getattr(self, f) for f in self._fields}, **changes})

    def asdict(self) -> dict:
        """The fields as a dict, nested records, dicts, lists and tuples converted or copied (as dataclasses.asdict)."""
        return {f: _plain(getattr(self, f)) for f in self._fields}


def _plain(value):
    if isinstance(value, Record):
        return value.asdict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _refuse_assignment(self, name, *value):
    raise AttributeError(f"cannot assign to field {name!r}: {type(self).__qualname__} is frozen")


def _hash_fields(self) -> int:
    return hash(self._values())
