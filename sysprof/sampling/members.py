"""process_tree's record of who held which slot when, as both backends report it (``devices`` entries with
``"source": "process_tree"``, all strings: csrc/sources/process_tree_members.hpp, portable/tree.py), typed for
``Sampler.members``."""
from __future__ import annotations

from typing import Dict, Iterable, List, Mapping


def is_tenure(entry: Mapping[str, object]) -> bool:
    """Whether a backend's ``devices`` entry is a process_tree tenure rather than a device."""
    return entry.get("source") == "process_tree"


def tenures(entries: Iterable[Mapping[str, object]]) -> List[Dict[str, object]]:
    """The tenures among ``entries``, oldest first: ``slot``, ``pid``, ``start_ns``, ``end_ns`` (None while it
    lasts) as ints, ``comm`` as str; a count of tenures dropped past the limit as a last ``{"dropped": n}``."""
    out: List[Dict[str, object]] = []
    for d in entries:
        if not is_tenure(d):
            continue
        if "dropped" in d:
            out.append({"dropped": int(d["dropped"])})
            continue
        end = d.get("end_ns")
        out.append({"slot": int(d["slot"]), "pid": int(d["pid"]), "comm": str(d.get("comm", "")),
                    "start_ns": int(d["start_ns"]), "end_ns": None if end is None else int(end)})
    return out
