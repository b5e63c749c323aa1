"""What became of the numba kernels in this process: compiled, not compiled (numba not installed, or installed but
failing to import), or compiled afresh because their cache could not be read.

The kernel modules (:data:`fdcontrol.kernels.KERNEL_MODULES`) compile their kernels at import, cached on disk, and
run the Python forms of the same computations where ``import numba`` raises ``ImportError`` (the ``fast`` extra not
installed). Two other failures must not pass for that one:

* a cache entry that cannot be read — an index or a data file cut short, or written by another numba or Python
  whose pickles name modules this one lacks (``ModuleNotFoundError``, itself an ``ImportError``). :func:`guard`
  wraps numba's cache so that such an entry of an fdcontrol kernel is reported (a ``RuntimeWarning`` naming the
  kernel's module, its function and the error), its index emptied, and the kernel compiled afresh, which writes
  its cache again: the kernel runs compiled, and the next process loads the new entry. Only an error raised while
  numba reads the entry (its files opened and unpickled, the kernel rebuilt from them) is taken for that; any other
  error of the load is raised as it is. (Other libraries' kernels keep numba's own behaviour.)
* numba installed but failing to import (a numpy it does not support, a broken llvmlite): reported once, with the
  error; the modules then run their Python forms. A numba that imports but whose cache module
  (``numba.core.caching``) does not is not that: its kernels compile; it is said once, with the error, and its
  cache keeps numba's own handling.

``import fdcontrol`` installs the guard before any kernel loads. :func:`status` says what happened in this process;
:func:`summary` says it in one line (``fdcontrol serve`` prints it at startup when it is not plain "compiled",
``/health`` reports it as ``kernels``, ``python -m fdcontrol.kernels`` prints it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import warnings
import weakref
from collections.abc import Mapping
from typing import Any

#: what :func:`guard` found: whether it ran, numba's version (None: not imported), numba's import error, and the
#: kernels compiled afresh as (module, function, error)
_STATE: dict[str, Any] = {"guarded": False, "numba": None, "error": None}
_RECOMPILED: list[tuple[str, str, str]] = []
_BROKEN: weakref.WeakSet[Any] = weakref.WeakSet()  # the caches found unreadable (their save may fail too)


def _text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _ours(cache: Any) -> tuple[str, str] | None:
    """(module, function) of the kernel behind numba's `cache`, if it is one of fdcontrol's."""
    func = getattr(cache, "_py_func", None)
    module = getattr(func, "__module__", None) or ""
    if module != "fdcontrol" and not module.startswith("fdcontrol."):
        return None
    return module, getattr(func, "__qualname__", "?")


def guard() -> None:
    """Check that numba imports and wrap its cache's load and save (once per process; a no-op without numba)."""
    if _STATE["guarded"]:
        return
    _STATE["guarded"] = True
    if importlib.util.find_spec("numba") is None:  # not installed: the documented fallback, nothing to report
        return
    try:
        import numba
    except Exception as exc:  # installed but broken: the kernel modules will fall back, say why
        _STATE["error"] = _text(exc)
        warnings.warn(f"fdcontrol: numba is installed but failed to import ({_STATE['error']}): the numba kernels "
                      "are not compiled and the control loop runs their Python forms, slower", RuntimeWarning,
                      stacklevel=2)
        return
    _STATE["numba"] = str(getattr(numba, "__version__", "?"))
    try:
        from numba.core import caching
    except Exception as exc:  # numba works (the kernels compile), only its cache is not where the guard looks
        warnings.warn(f"fdcontrol: numba {_STATE['numba']} imports, but its cache module numba.core.caching does not "
                      f"({_text(exc)}): the kernels are compiled, and a cache entry that cannot be read is left to "
                      "numba's own handling", RuntimeWarning, stacklevel=2)
        return
    cache = getattr(caching, "Cache", None)
    load, save = getattr(cache, "load_overload", None), getattr(cache, "save_overload", None)
    if load is None or save is None:  # another numba's cache: its own handling (the guard is not installed)
        return

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        try:
            return load(self, sig, target_context)
        except Exception as exc:
            kernel = _ours(self)
            if kernel is None or not _reading(self, exc):  # another library's, or not the entry's reading: raised
                raise
            _unreadable(self, kernel, exc)
            return None  # as if not cached: numba compiles the kernel and saves it over the broken entry

    def save_overload(self: Any, sig: Any, data: Any) -> None:
        try:
            save(self, sig, data)
        except Exception as exc:
            if self not in _BROKEN:
                raise
            warnings.warn(f"fdcontrol: the numba cache of {_ours(self)} could not be written again "
                          f"({_text(exc)}): the kernel runs compiled, and is compiled again by the next process",
                          RuntimeWarning, stacklevel=2)

    load_overload.__wrapped__ = load  # type: ignore[attr-defined]
    save_overload.__wrapped__ = save  # type: ignore[attr-defined]
    cache.load_overload = load_overload
    cache.save_overload = save_overload


def _reading(cache: Any, exc: BaseException) -> bool:
    """Whether `exc` was raised while numba read `cache`'s entry: its index and data files opened and unpickled
    (the cache file's ``load``) or the kernel rebuilt from what they held (the cache implementation's
    ``rebuild``). Anything else — numba's target context, the entry's key, a bug of its own — is not an
    unreadable cache, and is raised as it is."""
    codes = set()
    for owner, name in ((getattr(cache, "_cache_file", None), "load"), (getattr(cache, "_impl", None), "rebuild")):
        code = getattr(getattr(getattr(owner, name, None), "__func__", None), "__code__", None)
        if code is not None:
            codes.add(code)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False


def _unreadable(cache: Any, kernel: tuple[str, str], exc: Exception) -> None:
    """Report a cache entry that could not be read and empty its index (the compilation that follows writes it)."""
    module, function = kernel
    _RECOMPILED.append((module, function, _text(exc)))
    _BROKEN.add(cache)
    warnings.warn(f"fdcontrol: the numba cache of {module}.{function} could not be read ({_text(exc)}): "
                  "compiling it afresh and writing its cache again", RuntimeWarning, stacklevel=3)
    # an empty index: the save after the compilation does not read the broken one again (where it cannot be
    # written, the save fails and says so; the compiled kernel runs either way)
    with contextlib.suppress(Exception):
        cache.flush()


def status() -> dict[str, Any]:
    """This process's kernels: ``numba`` (its version, or None where it is not installed or failed to import),
    ``error`` (numba's import error, or None), ``recompiled`` (``[module, function, error]`` of each kernel whose
    cache could not be read and that was compiled afresh). Plain data: it crosses to the service's API process."""
    return {"numba": _STATE["numba"], "error": _STATE["error"], "recompiled": [list(r) for r in _RECOMPILED]}


def summary(*statuses: Mapping[str, Any] | None) -> str:
    """One line for one or more processes' :func:`status` (this process's when none is given): "compiled (numba
    …)" when all is well, otherwise what is not and why."""
    given = [s for s in statuses if s] if statuses else [status()]
    if not given:
        return "unknown"
    errors = sorted({s["error"] for s in given if s.get("error")})
    if errors:
        return (f"not compiled: numba is installed but failed to import ({'; '.join(errors)}); the Python forms "
                "run, slower")
    versions = sorted({s["numba"] for s in given if s.get("numba")})
    if not versions:
        return "not compiled: numba is not installed (the fast extra); the Python forms run, slower"
    line = f"compiled (numba {', '.join(versions)})"
    recompiled = sorted({(m, f, e) for s in given for m, f, e in s.get("recompiled", ())})
    if recompiled:
        line += ("; compiled afresh, their numba cache unreadable: "
                 + "; ".join(f"{m}.{f} ({e})" for m, f, e in recompiled))
    return line


def ok(*statuses: Mapping[str, Any] | None) -> bool:
    """Whether :func:`summary` of the same statuses is the plain "compiled" (nothing to report)."""
    given = [s for s in statuses if s] if statuses else [status()]
    return bool(given) and all(s.get("numba") and not s.get("error") and not s.get("recompiled") for s in given)
