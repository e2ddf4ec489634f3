"""The one way a byte string from the kernel, a file or a driver becomes text: UTF-8, every byte that is not
UTF-8 replaced by U+FFFD. The kernel cuts a comm at 15 bytes, mid-character for a name of 8 or more Cyrillic,
Greek or accented letters; interface, disk and driver names are bytes. (The extension's strings reach Python
through its twin, ``csrc/py_text.hpp``.)"""
from __future__ import annotations

__all__ = ["text"]


def text(value) -> str:
    """``value`` as a str that encodes to UTF-8: bytes decoded with replacement; a str holding lone surrogates
    (``os.fsdecode`` or psutil's ``surrogateescape`` of bytes that are not UTF-8) turned back into its bytes and
    decoded with replacement; anything else ``str()``-ed."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    s = value if isinstance(value, str) else str(value)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        pass
    try:
        raw = s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = s.encode("utf-8", "surrogatepass")
    return text(raw)


def encodable(obj):
    """``obj`` (an event: dicts, lists, tuples, strs, numbers) with every str that does not encode to UTF-8 (lone
    surrogates: ``sys.argv`` and ``os.fsdecode`` of bytes that are not UTF-8, a marker arg) passed through
    :func:`text`, so every trace writer can write it (protobuf refuses them, strict JSON parsers too); ``obj``
    itself where there is none."""
    if isinstance(obj, str):
        if obj.isascii():
            return obj
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            return text(obj)
    if isinstance(obj, dict):
        items = [(encodable(k), encodable(v)) for k, v in obj.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, obj.items())):
            return obj
        return dict(items)
    if isinstance(obj, (list, tuple)):
        items = [encodable(v) for v in obj]
        return obj if all(a is b for a, b in zip(items, obj)) else type(obj)(items)
    return obj
