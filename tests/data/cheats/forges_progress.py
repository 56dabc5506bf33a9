"""Cheat: writes nothing, but appends PASSED lines to every progress-like file it can find around its
working folder (in the old plain format and in the signed one, with a made-up signature).

A real one would walk all of /tmp; this one walks only three folders up from where it runs (the
test's own temp folder), so that it never touches another run on the same machine."""
import json
import os

_UUIDS = ["00000000-0000-4000-8000-00000000000%d" % i for i in range(10)]


def _forge() -> int:
    lines = []
    for u in _UUIDS:
        rec = {"event": "done", "label": "candidate", "uuid": u, "status": "PASSED", "max_abs_err": 0.0}
        lines.append(json.dumps(rec))
        lines.append(json.dumps({"seq": 10 ** 6, "rec": rec, "mac": "0" * 64}))
    top = os.getcwd()
    for _ in range(3):
        top = os.path.dirname(top)
    hit = 0
    for dirpath, _dirs, files in os.walk(top):
        for f in files:
            if f.endswith(".jsonl") or "progress" in f:
                try:
                    with open(os.path.join(dirpath, f), "a") as fh:
                        fh.write("\n".join(lines) + "\n")
                    hit += 1
                except OSError:
                    pass
    return hit


_forge()


def run(x, bias, scale, out):
    _forge()
