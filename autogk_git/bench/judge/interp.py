"""Triton's CPU interpreter (TRITON_INTERPRET=1) without its repeated set-up: `patch_once()`.

Each launch of a kernel under the interpreter points `triton.language`'s functions at interpreted ones
(`interpreter._patch_lang`, over `inspect.getmembers` of the language's modules) and puts them back
when the launch ends. Triton 3.x does the same again on every call of a `@triton.jit` helper inside the
launch (`InterpretedFunction.__call__`), including the language's own helpers (`tl.max`, `tl.sum`),
although the launch has already patched those modules. Skipping the repeats cut the kernels' calls
by 13-39 % on the bundled kernels (`benchmarks/interp_once.py`: rmsnorm's `tl.sum` is such a helper too)
and the sparse-attention attempt 28's interpreter check from 20.2 to 14.4 CPU-s.

`patch_once()` makes a helper's call inside a launch patch only the language modules this launch has
not patched yet (`triton.language`, `triton.language.core`: a helper of the library's own sees `core`
where the kernel sees `tl`). What a helper's patching sets is what is already set, so skipping it
changes no result; the launch's own patch and its restore at the end are Triton's, untouched. A helper
called outside any launch, and a Triton without these internals, keep Triton's own behaviour.
Correctness only: GPU runs never use the interpreter.
"""
from __future__ import annotations

_DONE = "_autogk_patch_once"


def patch_once() -> bool:
    """Install the once-per-launch patching in this process; True when it is (or already was) in place."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter as ip
        real_patch, real_call, scope_cls = ip._patch_lang, ip.GridExecutor.__call__, ip._LangPatchScope
    except (ImportError, AttributeError):  # no triton, or one whose interpreter is built otherwise
        return False
    if getattr(ip, _DONE, False):
        return True
    launch = {"on": False, "patched": set()}  # within a launch: ids of the language modules patched so far

    def langs(fn) -> set[int]:
        return {id(v) for v in getattr(fn, "__globals__", {}).values() if v is tl or v is tl.core}

    def patch_lang(fn):
        if not launch["on"]:
            return real_patch(fn)
        mine = langs(fn)
        if mine and mine <= launch["patched"]:
            return scope_cls()  # nothing set, so nothing to restore
        scope = real_patch(fn)
        launch["patched"] |= mine
        return scope

    def grid_call(self, *args, **kwargs):
        saved = launch["on"], launch["patched"]
        launch["on"], launch["patched"] = True, set()
        try:
            return real_call(self, *args, **kwargs)
        finally:
            launch["on"], launch["patched"] = saved

    ip._patch_lang = patch_lang
    ip.GridExecutor.__call__ = grid_call
    setattr(ip, _DONE, True)
    return True
