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
    return raw.decode("utf-8", "replace")
