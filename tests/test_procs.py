"""autogk_git/procs.py: the helpers for this process and others by pid."""
from __future__ import annotations

import gc
import os
import subprocess
import sys

from autogk_git import procs


def test_no_gc_holds_the_collector_off_for_its_block_then_freezes_what_the_process_holds(tmp_path, monkeypatch):
    assert gc.isenabled()
    made = object.__new__(type("Made", (), {}))  # a tracked object alive before the block's end
    walked = lambda: any(o is made for o in gc.get_objects())  # noqa: E731 - frozen objects are not listed
    (tmp_path / "autogk_test_heavy.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with procs.no_gc():  # a later block that imports nothing new freezes nothing: garbage stays collectable
            pass
        assert walked()
        with procs.no_gc():
            assert not gc.isenabled()
            import autogk_test_heavy  # noqa: F401
        assert gc.isenabled() and not walked()
    finally:
        gc.unfreeze()  # this worker's collector as it was
        sys.modules.pop("autogk_test_heavy", None)
    gc.disable()  # a caller that had it off keeps it off
    try:
        with procs.no_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    try:
        with procs.no_gc():
            raise KeyError("an import that fails")
    except KeyError:
        pass
    assert gc.isenabled()


def test_pid_alive_tells_a_running_process_from_an_ended_one():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert procs.pid_alive(os.getpid()) and not procs.pid_alive(p.pid)
