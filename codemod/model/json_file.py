"""One reader for every JSON file codemod reads back (journals, the transaction log, a `hot` report, a trace).

Such a file is input like any other: it may be a directory, not UTF-8, truncated, or nested deep enough to
exhaust Python's recursion. Each of those is BadInput naming the file, never a traceback.
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path

from codemod.model import paths
from codemod.model.errors import BadInput

# codemod's own formats nest a few levels (a journal's capture: 4); a profiler trace's events a few more.
MAX_DEPTH = 64
MAX_BYTES = 1 << 30  # a journal holds the files it changed: tens of MB for many ops on a full checkout


def read(path: Path, what: str, then: str) -> object:
    """PATH's JSON document. WHAT names the format in an error ("journal"), THEN says what to do about it."""
    paths.regular_file(path, f"a {what}")
    try:
        info = path.stat()
        if info.st_size > MAX_BYTES:
            raise _Unreadable(f"{info.st_size:,} bytes, more than {what} can hold")
        data = path.read_bytes()
    except OSError as error:
        raise BadInput(f"{path}: cannot read the {what} ({error.strerror}); {then}") from None
    except _Unreadable as error:
        raise BadInput(f"{path}: {error}, not a {what}; move it away and run again") from None
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise BadInput(f"{path}: not a {what}: not UTF-8 (byte {error.start}); {then}") from None
    except json.JSONDecodeError as error:
        raise BadInput(f"{path}: not a {what}: malformed JSON at line {error.lineno} ({error.msg}); {then}") from None
    except RecursionError:  # deeper than the parser goes: deeper than MAX_DEPTH too
        document = _TOO_DEEP
    if document is _TOO_DEEP or _depth_exceeds(document, MAX_DEPTH):
        raise BadInput(f"{path}: not a {what}: JSON nested deeper than {MAX_DEPTH} levels; {then}")
    return document


class _Unreadable(Exception):
    pass


_TOO_DEEP = object()


def _depth_exceeds(document: object, limit: int) -> bool:
    """Whether DOCUMENT nests lists and objects more than LIMIT deep (walked without recursion)."""
    stack = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def _required(hint: object) -> set[str]:
    """The fields of a dataclass or TypedDict a document must hold: those with no default (a field added later has one,
    so what an earlier version wrote still reads)."""
    if typing.is_typeddict(hint):
        return set(hint.__required_keys__)
    missing = dataclasses.MISSING
    return {f.name for f in dataclasses.fields(hint) if f.default is missing and f.default_factory is missing}


def matches(value: object, hint: object) -> bool:
    """Whether the JSON VALUE has the shape of the type HINT: a dataclass or TypedDict is an object of its fields, all
    but those with a default required, a tuple or list an array (a fixed tuple of its length), a dict an object."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint) or typing.is_typeddict(hint):
        fields = typing.get_type_hints(hint)
        return isinstance(value, dict) and _required(hint) <= value.keys() <= fields.keys() and all(matches(value[k], fields[k]) for k in value)
    if origin in (tuple, list):
        if not isinstance(value, list):
            return False
        if origin is tuple and args[-1:] != (Ellipsis,):
            return len(value) == len(args) and all(map(matches, value, args))
        return all(matches(item, args[0]) for item in value)
    if origin is dict:
        return isinstance(value, dict) and all(matches(k, args[0]) and matches(v, args[1]) for k, v in value.items())
    if origin in (types.UnionType, typing.Union):
        return any(matches(value, arg) for arg in args)
    if hint is None or hint is type(None):
        return value is None
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(hint, type) and isinstance(value, hint)
