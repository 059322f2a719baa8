"""Exact JSON for the session log: JavaScript-identical output, lossless Python round-trips.

Python's stock ``json`` is close but not exact for us: it formats floats unlike
``JSON.stringify``, and it sees strings unlike JavaScript: it merges an escaped surrogate
pair (``"\\ud83d\\ude00"``) but not a raw one (a Python ``str`` holding a high then a
low surrogate), which it writes as two escapes. SPEC §4.1: a pair, however written, is
its astral character (``core.surrogates``); only unpaired surrogates are escaped, each
alone. This module does both while keeping the common path on the C implementation.
"""

from __future__ import annotations

import decimal
import importlib
import json
import math
import os
import re
from collections.abc import Callable
from json import encoder as json_encoder
from json.encoder import encode_basestring
from types import ModuleType
from typing import Any, NoReturn

from core.jsondepth import dumps_deep, elide_deep
from core.surrogates import has_surrogate, merge_surrogate_pairs

__all__ = [
    "FrozenDict",
    "FrozenList",
    "JSONDecodeError",
    "dumps_js",
    "encode_frozen",
    "freeze_json",
    "loads_exact",
    "thaw_json",
    "utf8_len",
]

JSONDecodeError = json.JSONDecodeError

_SURROGATE = re.compile("[\ud800-\udfff]")
# An escaped high surrogate directly followed by an escaped low one (a row an older dsh
# wrote: it kept such pairs apart). A false positive (an escaped backslash before "u")
# costs nothing but a look.
_ESCAPED_PAIR = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _py_utf8_len(text: str) -> int:
    """UTF-8 byte length, counting a lone surrogate as 3 bytes (``surrogatepass``)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _py_escaped_pair(text: str) -> bool:
    """Whether ``text`` holds an escaped surrogate pair (see ``_ESCAPED_PAIR``)."""
    return _ESCAPED_PAIR.search(text) is not None


# --------------------------------------------------------------------------- frozen values


def _immutable(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError("this JSON value is immutable; use thaw_json() for a mutable copy")


class FrozenDict(dict[str, Any]):
    """A read-only ``dict`` (equal to, and serialisable like, a plain one)."""

    __slots__ = ()
    __setitem__ = __delitem__ = _immutable
    clear = pop = popitem = setdefault = update = _immutable
    __ior__ = _immutable

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


class FrozenList(list[Any]):
    """A read-only ``list`` (equal to, and serialisable like, a plain one)."""

    __slots__ = ()
    __setitem__ = __delitem__ = _immutable
    append = extend = insert = pop = remove = clear = sort = reverse = _immutable
    __iadd__ = __imul__ = _immutable

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> FrozenList:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    def __repr__(self) -> str:
        return f"FrozenList({list.__repr__(self)})"


def _freeze_list(items: list[Any]) -> FrozenList:
    for i, item in enumerate(items):
        if type(item) is list:
            items[i] = _freeze_list(item)
    return FrozenList(items)


def _freeze_object(obj: dict[str, Any]) -> FrozenDict:
    for key, value in obj.items():
        if type(value) is list:
            obj[key] = _freeze_list(value)
    return FrozenDict(obj)


# --------------------------------------------------------------------------- C versions


# ``core/_speedups.c`` does the three loops above that see every character or object of a
# large read (UTF-8 sizes, the escaped-pair scan, freezing) several times faster. It is
# optional: where it could not be compiled, the pure-Python versions above do the work,
# and the tests check the two agree. ``DSH_PURE_PYTHON=1`` uses them even where it was
# (to measure or test the fallback).
def _load_speedups() -> ModuleType | None:
    if os.environ.get("DSH_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("core._speedups")
    except ImportError:  # only where no C compiler was available
        return None


_speedups = _load_speedups()

utf8_len: Callable[[str], int]
_escaped_pair: Callable[[str], bool]
_object_hook: Callable[[dict[str, Any]], dict[str, Any]]
_top_list_hook: Callable[[list[Any]], list[Any]]
if _speedups is not None:
    _speedups.set_types(FrozenDict, FrozenList)
    utf8_len = _speedups.utf8_len
    _escaped_pair = _speedups.escaped_pair
    _object_hook = _speedups.freeze_object
    _top_list_hook = _speedups.freeze_list
else:
    utf8_len = _py_utf8_len
    _escaped_pair = _py_escaped_pair
    _object_hook = _freeze_object
    _top_list_hook = _freeze_list
SPEEDUPS = _speedups is not None
"""Whether the C versions are in use (not when unbuilt, or with ``DSH_PURE_PYTHON=1``)."""


def _key_shown(key: str) -> str:
    text = repr(key)
    return text if len(text) <= 60 else text[:59] + "…"


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different (``loads_exact(…, unique_keys=True)``)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {_key_shown(key)}")
            seen.add(key)
    return obj


# One decoder each: ``json.loads`` with keyword arguments builds a new decoder per call.
_FROZEN_DECODER = json.JSONDecoder(object_hook=_object_hook)
_PLAIN_DECODER = json.JSONDecoder()
_UNIQUE_DECODER = json.JSONDecoder(object_pairs_hook=_unique_object)
# ``decode`` wraps these in two whitespace regexes and a frame per call.
_FROZEN_SCAN: Callable[[str, int], tuple[Any, int]] = _FROZEN_DECODER.scan_once  # type: ignore[attr-defined]
_PLAIN_SCAN: Callable[[str, int], tuple[Any, int]] = _PLAIN_DECODER.scan_once  # type: ignore[attr-defined]
_UNIQUE_SCAN: Callable[[str, int], tuple[Any, int]] = _UNIQUE_DECODER.scan_once  # type: ignore[attr-defined]


def thaw_json(value: Any) -> Any:
    """A plain, mutable deep copy of a JSON value (frozen or not), of any depth (it does
    not recurse: ``core.jsondepth``)."""
    return elide_deep(value, None)


def freeze_json(value: Any) -> Any:
    """Validate ``value`` as JSON and return a detached, deeply immutable copy of it."""
    return loads_exact(dumps_js(value))


# --------------------------------------------------------------------------- encoding


def _js_number(x: float) -> str:
    """Format a finite float exactly as JavaScript's ``Number.prototype.toString``."""
    if x == 0:
        return "0"
    if x.is_integer() and abs(x) < 1e21:
        return str(int(x))
    sign, digit_tuple, exponent = decimal.Decimal(repr(x)).as_tuple()
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exponent, int)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped or "0"
    k = len(digits)
    n = k + exponent  # value = 0.digits * 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return ("-" if sign else "") + text


def _encode_str(text: str) -> str:
    out: str = encode_basestring(merge_surrogate_pairs(text))
    if not text.isascii():
        out = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    return out


def dumps_js(value: Any) -> str:
    """Compact JSON identical to JavaScript ``JSON.stringify(value)``.

    Non-ASCII stays raw, each surrogate code point is escaped on its own as lowercase
    ``\\udxxx``. Anything that is not JSON (NaN, infinities, non-str keys, cycles, other
    types) raises ``TypeError``.

    Values made only of plain dicts, lists, tuples, str, int, bool and None (what the log
    almost always holds) go through the C encoder, whose output is then identical; floats,
    other mappings and subclasses take the exact pure-Python encoder.
    """
    if _encode_js is not None:
        text = _encode_js(value, False)
        if text is not None:
            return text  # type: ignore[no-any-return]
    if _is_c_safe(value):
        out: str = _C_ENCODE(value)
        # Inside a string's quotes the encoder leaves surrogates raw and side by side as
        # they were, and no two strings touch: merging the text merges each string.
        return out if out.isascii() else _escape_surrogates(out)
    return _dumps_js_exact(value)


_C_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _c_encode_function() -> Callable[[Any], str]:
    """The C encoder called directly: ``JSONEncoder.encode`` builds a new one on every
    call (and a dict of markers to find cycles). ``dumps_js`` hands it only values
    ``_c_safe`` accepted (nothing deeper than ``_C_SAFE_DEPTH``, so no cycle), so it needs
    no markers; its output is ``JSONEncoder.encode``'s."""
    make = getattr(json_encoder, "c_make_encoder", None)
    if make is None:
        return _C_ENCODER.encode
    encoder = make(
        None,  # no cycle markers
        _C_ENCODER.default,
        json_encoder.encode_basestring,
        None,  # indent
        ":",
        ",",
        False,  # sort_keys
        False,  # skipkeys
        False,  # allow_nan
    )
    join = "".join

    def encode(value: Any) -> str:
        return join(encoder(value, 0))

    return encode


_C_ENCODE = _c_encode_function()
_C_SAFE_DEPTH = 64
_C_SAFE_ATOMS = frozenset({str, int, bool, type(None)})


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _escape_surrogates(text: str) -> str:
    """JSON text whose strings hold raw surrogates, pairs merged and the rest escaped."""
    if not has_surrogate(text):
        return text
    return _SURROGATE.sub(_escape_surrogate, merge_surrogate_pairs(text))


def _c_safe(value: Any, depth: int) -> bool:
    """True when the C encoder writes ``value`` exactly as ``JSON.stringify`` does: no
    floats (formatted differently), no non-str keys (silently converted), no other types,
    and shallow enough that no cycle can hide in it."""
    kind = type(value)
    if kind in _C_SAFE_ATOMS:
        return True
    if depth >= _C_SAFE_DEPTH:
        return False
    if kind is dict or kind is FrozenDict:
        for key, item in value.items():
            if type(key) is not str or not (
                type(item) in _C_SAFE_ATOMS or _c_safe(item, depth + 1)
            ):
                return False
        return True
    if kind is list or kind is tuple or kind is FrozenList:
        for item in value:  # noqa: SIM110 - a loop is faster than all() over a generator
            if not (type(item) in _C_SAFE_ATOMS or _c_safe(item, depth + 1)):
                return False
        return True
    return False


def _py_c_safe(value: Any) -> bool:
    """``_c_safe`` from the top: the reference of ``core._speedups.c_safe``."""
    return _c_safe(value, 0)


# The frozen decoder of ``loads_exact`` in one C pass: containers built frozen, escaped
# pairs merged. It declines (``ValueError``) anything but plain strict JSON, which
# then takes the path below it. (An extension built before it was added lacks it.)
_loads_frozen: Callable[[str], Any] | None = getattr(_speedups, "loads_frozen", None)

# The C version where the extension has it (an extension built before it was added
# lacks it).
_is_c_safe: Callable[[Any], bool] = getattr(_speedups, "c_safe", None) or _py_c_safe

# ``core._speedups.encode_frozen(value, freeze)``: for a c_safe value whose ints fit in 64
# bits, ``dumps_js(value)`` written in one C pass (with ``freeze``: the pair of it and
# ``loads_exact`` of it, the detached frozen copy built without parsing); ``None`` for
# anything else. ``None`` where the extension is not in use.
_encode_js: Callable[[Any, bool], Any] | None = getattr(_speedups, "encode_frozen", None)


def encode_frozen(value: Any) -> tuple[str, Any] | None:
    """``(dumps_js(value), loads_exact(dumps_js(value)))`` for the values the C encoder
    takes whole (what the log almost always holds: dicts, lists, str, 64-bit int, bool,
    None); ``None`` for any other value, or without the C extension: the caller then
    takes its plain path (which raises what it raises)."""
    if _encode_js is None:
        return None
    return _encode_js(value, True)  # type: ignore[no-any-return]


def _scalar_js(v: Any) -> str:
    if isinstance(v, str):
        return _encode_str(v)
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return int.__repr__(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise TypeError(f"{v!r} is not JSON-serialisable")
        return _js_number(v)
    raise TypeError(f"{type(v).__name__} is not JSON-serialisable")


def _key_js(key: Any) -> str:
    if not isinstance(key, str):
        raise TypeError(f"JSON object keys must be str, not {type(key).__name__}")
    return _encode_str(key)


def _dumps_js_exact(value: Any) -> str:
    """The reference encoder behind ``dumps_js`` (every value, in pure Python, at any depth:
    ``core.jsondepth``)."""
    return dumps_deep(value, _scalar_js, _key_js)


# --------------------------------------------------------------------------- decoding


def loads_exact(text: str, *, frozen: bool = True, unique_keys: bool = False) -> Any:
    """Parse JSON as JavaScript does: a surrogate pair, escaped or raw (or one half each),
    is its astral character, unpaired surrogates stay; objects/arrays frozen by default.

    ``unique_keys`` (for untrusted files: ``dsh import``) makes a key repeated in any object a
    ``ValueError`` and returns plain containers; the store's reads never pay for it.
    """
    if unique_keys:
        frozen = False
    elif frozen and _loads_frozen is not None and text.__class__ is str:
        try:
            return _loads_frozen(text)
        except ValueError:
            pass  # not plain strict JSON: the path below gives its value or its error
    if text.isascii() or not has_surrogate(text):
        # Raw surrogates aside, the stock decoder reads strings as JavaScript does.
        if unique_keys:
            decoder, scan = _UNIQUE_DECODER, _UNIQUE_SCAN
        elif frozen:
            decoder, scan = _FROZEN_DECODER, _FROZEN_SCAN
        else:
            decoder, scan = _PLAIN_DECODER, _PLAIN_SCAN
        try:
            # The scanner itself when the text is one value without surrounding whitespace
            # (everything the store wrote); ``decode`` for the rest and for its errors.
            try:
                value, end = scan(text, 0)
            except StopIteration:
                end = -1
            if end != len(text):
                value = decoder.decode(text)
        except RecursionError as err:
            if unique_keys:  # an untrusted file's line: that deep, it is refused anyway
                raise JSONDecodeError("JSON is nested too deeply", text, 0) from err
            # What a store holds (a row written by hand, or before event data had a depth
            # limit), deeper than the stock decoder reaches: parsed on a list instead.
            return _SlowParser(text, frozen).parse()
        return _top_list_hook(value) if frozen and type(value) is list else value
    return _SlowParser(text, frozen, unique_keys).parse()


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_STRING_CHUNK = re.compile(r'[^"\\\x00-\x1f]*')
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}


class _SlowParser:
    """A small JSON parser for text holding raw surrogates, which it pairs with their
    neighbours however each is written (``merge``; ``merge=False`` reads as dsh did before
    SPEC §4.1 changed: each escape one code point, for the upgrade of rows written then),
    and for text nested deeper than the stock decoder's recursion reaches (a row written by
    hand, or before event data had a depth limit): it keeps its open containers on a list
    of its own, so no depth makes it recurse."""

    def __init__(
        self, text: str, frozen: bool, unique_keys: bool = False, merge: bool = True
    ) -> None:
        self.s = text
        self.frozen = frozen
        self.unique_keys = unique_keys
        self.merge = merge

    def fail(self, msg: str, pos: int) -> NoReturn:
        raise JSONDecodeError(msg, self.s, pos)

    def parse(self) -> Any:
        value, end = self.value(_WS.match(self.s, 0).end())  # type: ignore[union-attr]
        end = _WS.match(self.s, end).end()  # type: ignore[union-attr]
        if end != len(self.s):
            self.fail("Extra data", end)
        return value

    def ws(self, i: int) -> int:
        return _WS.match(self.s, i).end()  # type: ignore[union-attr]

    def key(self, i: int, obj: dict[str, Any]) -> tuple[str, int]:
        """The key starting at ``i`` of an object holding ``obj`` so far, and where its
        value starts."""
        s = self.s
        if s[i : i + 1] != '"':
            self.fail("Expecting property name enclosed in double quotes", i)
        key, j = self.string(i + 1)
        if self.unique_keys and key in obj:
            self.fail(f"duplicate key {_key_shown(key)}", i)
        j = self.ws(j)
        if s[j : j + 1] != ":":
            self.fail("Expecting ':' delimiter", j)
        return key, self.ws(j + 1)

    def close(self, container: dict[str, Any] | list[Any]) -> Any:
        if not self.frozen:
            return container
        return FrozenDict(container) if isinstance(container, dict) else FrozenList(container)

    def value(self, i: int) -> tuple[Any, int]:
        """The value starting at ``i`` and where it ends. Open objects and arrays wait on
        ``open``: each with the key its next member goes under (``None`` in an array)."""
        s = self.s
        open: list[tuple[dict[str, Any] | list[Any], str | None]] = []
        while True:
            c = s[i : i + 1]
            value: Any
            if c == "{" or c == "[":
                i = self.ws(i + 1)
                if s[i : i + 1] == ("}" if c == "{" else "]"):
                    value, i = self.close({} if c == "{" else []), i + 1
                elif c == "{":
                    obj: dict[str, Any] = {}
                    key, i = self.key(i, obj)
                    open.append((obj, key))
                    continue
                else:
                    open.append(([], None))
                    continue
            elif c == '"':
                value, i = self.string(i + 1)
            else:
                value, i = self.scalar(i)
            while True:  # ``value`` is done: into its container, closing those it ends
                if not open:
                    return value, i
                container, name = open[-1]
                if isinstance(container, list):
                    container.append(value)
                elif name is not None:
                    container[name] = value
                i = self.ws(i)
                c = s[i : i + 1]
                if c == ",":
                    i = self.ws(i + 1)
                    if isinstance(container, dict):
                        name, i = self.key(i, container)
                        open[-1] = (container, name)
                    break
                if c != ("]" if isinstance(container, list) else "}"):
                    self.fail("Expecting ',' delimiter", i)
                open.pop()
                value, i = self.close(container), i + 1

    def scalar(self, i: int) -> tuple[Any, int]:
        s = self.s
        if i >= len(s):
            self.fail("Expecting value", i)
        for literal, result in (("null", None), ("true", True), ("false", False)):
            if s.startswith(literal, i):
                return result, i + len(literal)
        m = _NUMBER.match(s, i)
        if m is None or m.end() == i:
            self.fail("Expecting value", i)
        if m.group(1) or m.group(2):
            return float(m.group()), m.end()
        return int(m.group()), m.end()

    def string(self, i: int) -> tuple[str, int]:
        s = self.s
        chunks: list[str] = []
        while True:
            m = _STRING_CHUNK.match(s, i)
            assert m is not None
            chunks.append(m.group())
            i = m.end()
            if i >= len(s):
                self.fail("Unterminated string", i)
            c = s[i]
            if c == '"':
                joined = "".join(chunks)
                return (merge_surrogate_pairs(joined) if self.merge else joined), i + 1
            if c != "\\":
                self.fail("Invalid control character in string", i)
            esc = s[i + 1 : i + 2]
            if esc == "u":
                hexdigits = s[i + 2 : i + 6]
                if len(hexdigits) != 4 or not all(h in "0123456789abcdefABCDEF" for h in hexdigits):
                    self.fail("Invalid \\uXXXX escape", i)
                chunks.append(chr(int(hexdigits, 16)))  # paired when the string is done
                i += 6
            elif esc in _SIMPLE_ESCAPES:
                chunks.append(_SIMPLE_ESCAPES[esc])
                i += 2
            else:
                self.fail("Invalid escape", i)


def loads_unmerged(text: str) -> Any:
    """JSON read as dsh read it before SPEC §4.1 changed: every ``\\uXXXX`` one code point,
    escaped pairs kept apart (plain containers). Only for upgrading rows written then,
    whose stored lengths count the halves apart."""
    return _SlowParser(text, frozen=False, merge=False).parse()


# --------------------------------------------------------------------------- joining UTF-8


def _py_join_utf8(parts: list[bytes]) -> str:
    """The reference of ``join_utf8``."""
    return b"".join(parts).decode("utf-8")


join_utf8: Callable[[list[bytes]], str] = getattr(_speedups, "join_utf8", None) or _py_join_utf8
"""``b"".join(parts).decode("utf-8")`` for a list of bytes, each valid UTF-8 on its own.
The C version allocates the str once, at its exact size and kind, and never the joined
bytes: a large non-ASCII text costs itself plus its parts, where ``decode`` also builds
it in a full-size ASCII buffer before widening it (``prepare``'s peak memory)."""
