"""Which disks and network interfaces are sampled: the one device filter of every path (``Sampler(devices=...)``,
``SystemProfiler(devices=...)``, ``sysprof.profile(devices=...)``, ``sysprof record --devices GLOB``) and of both
backends.

``devices`` is a list of shell-style globs (:mod:`fnmatch`: ``*``, ``?``, ``[...]``) over device names as they
appear in channel names (``disk/<dev>/...``, ``net/<nic>/...``):

* ``GLOB`` keeps the devices it matches; ``!GLOB`` leaves them out.
* ``disk/GLOB`` or ``net/GLOB`` (also ``!disk/GLOB``) applies to that source only; any other glob applies to
  both (a device name may hold a ``/``: ``cciss/c0d0``).
* Once a source has a keeping glob, only the devices matching one are kept (``["disk/nvme*"]`` keeps the NVMe
  disks and every NIC but ``lo``; ``["sda"]`` keeps disk sda and no NIC).
* By default loop devices, RAM disks and zram (``disk/loop*``, ``disk/ram*``, ``disk/zram*``) and the loopback
  interface (``net/lo``) are left out: they carry no training I/O, and a node has dozens of loop devices. A
  keeping glob that matches one brings it back (``["*"]`` keeps every device; ``["*", "!ram*"]`` all but the
  RAM disks).
* ``!`` wins over a keeping glob: a device matching an excluding glob is left out.

``None`` (the default) is ``[]``: every device but the default exclusions. Partitions are never sampled (the disk
source reads whole disks only).

The rule resolves to an ordered list of ``(glob, keep)`` per source, first match wins, a device matching none
kept: :func:`rules`. The native sources (``csrc/sources/device_filter.hpp``) get that list as Config options
``device:<source>:+<glob>`` / ``device:<source>:-<glob>`` (:func:`native_options`) and apply it at discovery;
the portable backend calls :meth:`DeviceFilter.keeps`. A device left out has no channels.
"""
from __future__ import annotations

import fnmatch
from typing import Iterable, List, Optional, Sequence, Tuple

__all__ = ["DEFAULT_EXCLUDED", "DeviceFilter", "FILTERED_SOURCES", "check_devices"]

#: the sources whose devices the filter picks
FILTERED_SOURCES = ("disk", "net")
#: left out unless a keeping glob matches them
DEFAULT_EXCLUDED = {"disk": ("loop*", "ram*", "zram*"), "net": ("lo",)}


def check_devices(devices, what: str = "devices") -> Tuple[str, ...]:
    """``devices`` as a tuple of globs; ValueError naming ``what`` for anything but None or a list of non-empty
    strings (a lone string is refused: ``devices="sda"`` would be a list of letters), or ``disk/`` with no glob."""
    if devices is None:
        return ()
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Iterable):
        raise ValueError(f"{what} must be a list of globs (e.g. ['sd*', '!loop*']), got {devices!r}")
    out = tuple(devices)
    for g in out:
        if not isinstance(g, str) or not g.lstrip("!") or "\0" in g:
            raise ValueError(f"{what}: each entry must be a non-empty glob string, got {g!r}")
        source, sep, rest = g.lstrip("!").partition("/")
        if sep and source in FILTERED_SOURCES and not rest:
            raise ValueError(f"{what}: {g!r} has no glob after {source}/ (write {source}/GLOB)")
    return out


class DeviceFilter:
    """The resolved ``devices`` globs (see the module docstring). Raises ValueError as :func:`check_devices`."""

    def __init__(self, devices: Optional[Sequence[str]] = None) -> None:
        self.globs = check_devices(devices)
        self._rules = {source: self._resolve(source) for source in FILTERED_SOURCES}

    def _resolve(self, source: str) -> List[Tuple[str, bool]]:
        keep, drop = [], []
        for g in self.globs:
            excluded = g.startswith("!")
            body = g.lstrip("!")
            scope, sep, rest = body.partition("/")
            if sep and scope in FILTERED_SOURCES:
                if scope != source:
                    continue
                body = rest
            (drop if excluded else keep).append(body)
        out = [(g, False) for g in drop] + [(g, True) for g in keep]
        out += [(g, False) for g in DEFAULT_EXCLUDED[source]]
        if keep:
            out.append(("*", False))  # a source with keeping globs keeps only what they match
        return out

    def rules(self, source: str) -> List[Tuple[str, bool]]:
        """``[(glob, keep)]`` of ``source``, in order: the first glob matching a name decides; none: kept."""
        return list(self._rules[source])

    def keeps(self, source: str, name: str) -> bool:
        """Whether device ``name`` of ``source`` (``"disk"`` or ``"net"``) is sampled."""
        for glob, keep in self._rules[source]:
            if fnmatch.fnmatchcase(name, glob):
                return keep
        return True

    def native_options(self) -> List[str]:
        """The rules as the native sources read them from ``Config::options``: ``device:<source>:+<glob>`` or
        ``device:<source>:-<glob>``, in rule order (fnmatch(3) without flags: the same matching as
        :func:`fnmatch.fnmatchcase` for these names)."""
        return [f"device:{source}:{'+' if keep else '-'}{glob}"
                for source in FILTERED_SOURCES for glob, keep in self._rules[source]]

    def __repr__(self) -> str:
        return f"DeviceFilter({list(self.globs)!r})"
