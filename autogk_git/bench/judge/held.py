"""The timer's own objects held through a timed window (timer.py): what they are before the kernel's first
call and after its last; the values its bound L2 flush holds, and the floor each flush's device time is
held to. Sealed with the judge's other modules (seal.py); no imports, so both the timer and the tests can
take it alone."""
from __future__ import annotations


class TimerTampered(Exception):
    """The timer's own objects changed while the kernel's calls ran: its figures are not made. (Not a
    TimerError: the judge does not try another timer, the label is TAMPERED.)"""


def _contents(v: object) -> object:
    """The identities a container held (a list, tuple, dict or set), else None."""
    if isinstance(v, (list, tuple)):
        return tuple(map(id, v))
    if isinstance(v, dict):
        return tuple((k, id(x)) for k, x in v.items())
    if isinstance(v, (set, frozenset)):
        return frozenset(map(id, v))
    return None


def held_state(objs) -> tuple:
    """What a timer's objects are (timer.py's profiler and CUDA events), for held_unchanged: each one's
    type, and its instance attributes in order with their identities and, for containers, their items'
    identities.

    The kernel's code runs inside the timed window, below the timer's frame: through the frames (or gc's
    object lists) it can reach the profiler and the CUDA events the figures are read from, and an instance
    attribute (`prof.events = ...`, `ev.elapsed_time = ...`) or a swapped item would change those figures
    with nothing the seal sees (the seal holds modules and classes, not these objects)."""
    return tuple((type(o), tuple((k, id(v), _contents(v)) for k, v in getattr(o, "__dict__", {}).items()))
                 for o in objs)


def held_names(objs) -> tuple:
    """Each object's type and its instance attributes' names, in order: for objects whose attributes'
    values their own library changes (a Triton function's caches), where only an attribute added, removed
    or a class swapped tells of a patch."""
    return tuple((type(o), tuple(getattr(o, "__dict__", {}))) for o in objs)


def held_unchanged(objs, held: tuple, what: str) -> None:
    """Raise TimerTampered when held_state(objs) is no longer `held`."""
    if held_state(objs) != held:
        raise TimerTampered(f"the kernel changed the {what} timing it, inside its timed window (an attribute "
                            "set or swapped on the timer's own objects): a kernel may not touch what times it")


# A flush inside a timed window may take no less than this share of the timer's own fastest flush: a
# shrunk flush (fewer bytes, or none) leaves the L2 warm for the kernel's next call. Another process's work
# only lengthens a flush, and the calibration keeps the fastest of its runs, so an honest flush is at or
# above 1x; half still lets through a flush cut to just over half its bytes (about the L2's size).
FLUSH_FLOOR = 0.5
# Under CUDA graphs the calls' flushes are compared with the flush-only graph's, replayed beside them.
GRAPH_FLUSH_FLOOR = 0.75
FLUSH_TAMPERED = ("the L2 flush between the kernel's calls was changed inside its timed window (the timer's "
                  "flush shortened or swapped): a kernel may not touch what times it")


def flush_floor(durations: list[float], typical: float, floor: float = FLUSH_FLOOR, expected: int | None = None
                ) -> str:
    """'' when every flush took at least `floor` of `typical` us (and, given `expected`, that many were
    seen), else what did not."""
    if expected is not None and len(durations) != expected:
        return f"{len(durations)} flushes seen where {expected} were made"
    low = [d for d in durations if d < floor * typical]
    if not low:
        return ""
    return (f"{len(low)} of {len(durations)} flushes under {floor * 100:.0f} % of the timer's own "
            f"{typical:.1f} us, the shortest {min(low):.2f} us")


def cells(fn: object) -> tuple:
    """The identities of the values a closure holds (a flush bound by DeviceTimer._flusher)."""
    return tuple(id(c.cell_contents) for c in (getattr(fn, "__closure__", None) or ()))
