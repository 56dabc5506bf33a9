"""README command 1 on a fresh clone of a revision, timed: wall seconds and the whole machine's busy CPU.

    .venv/bin/python benchmarks/readme_command_one.py                 # this checkout's HEAD
    .venv/bin/python benchmarks/readme_command_one.py 9f97b11 HEAD    # one after the other, same machine
    .venv/bin/python benchmarks/readme_command_one.py --own-kernel    # the "Your own kernel" block instead

Each revision is cloned into a temporary folder (hermetic git config, this interpreter's `autogk` on
PATH), `main` is made there as the README's user has it, and README command 1 runs as written after its
setup step (`.venv/bin/autogk iterate`, the venv being this one, the package the clone's own through
PYTHONPATH). Prints one JSON line a revision: wall
seconds, busy CPU-seconds of the machine (`/proc/stat`: every process, forked and killed ones
included, so run it on an otherwise idle machine), and the command's last lines.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def busy_cpu_s() -> float:
    """The machine's busy CPU seconds so far (user, nice, system, irq, softirq, steal)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
    return busy / os.sysconf("SC_CLK_TCK")


def command_one() -> str:
    m = re.search(r"^bash scripts/setup\.sh && (\.venv/bin/autogk iterate[^\n]*)$", (REPO / "README.md").read_text(),
                  re.M)
    if not m:
        raise SystemExit("README command 1 is no longer `bash scripts/setup.sh && .venv/bin/autogk iterate ...`")
    return m.group(1).replace(".venv/bin/autogk", str(BIN / "autogk"))


def own_kernel_block() -> str:
    """The README's "Your own kernel" block as written, its `source .venv/bin/activate` this interpreter's, each
    line's time printed (init, then iterate)."""
    text = (REPO / "README.md").read_text()
    m = re.search(r"^## Your own kernel\n+```bash\n(.*?)\n```", text, re.M | re.S)
    if not m:
        raise SystemExit('README has no ```bash block under "## Your own kernel"')
    lines = m.group(1).replace("\\\n", " ").splitlines()
    out = []
    for line in lines:
        cmd = line.split("#", 1)[0].strip()
        if cmd.startswith("source .venv/bin/activate"):
            out.append(f"source {BIN / 'activate'}")
        elif cmd:
            out.append(f"s=$(date +%s.%N); {cmd}; rc=$?; echo \"block-line $s $(date +%s.%N)\" >&2; "
                       "[ $rc = 0 ] || exit $rc")
    return "\n".join(out)


def run(rev: str, own_kernel: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="autogk-readme-one-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / ".gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@example.com\n"
                                         "[init]\n\tdefaultBranch = main\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOGK_", "ANTHROPIC_", "MODAL_"))}
        env.update(HOME=str(home), GIT_CONFIG_GLOBAL=str(home / ".gitconfig"), GIT_CONFIG_NOSYSTEM="1",
                   PATH=f"{BIN}{os.pathsep}{env['PATH']}")
        env.pop("PYTHONPATH", None)
        root = Path(tmp) / "autogk"
        subprocess.run(["git", "clone", "-q", str(REPO), str(root)], check=True, env=env)
        subprocess.run(["git", "checkout", "-q", "-B", "main", rev], cwd=root, check=True, env=env)
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                             env=env).stdout.strip()
        env["PYTHONPATH"] = str(root)  # the revision's own autogk_git, not this checkout's (the venv's is editable)
        cpu0, t0 = busy_cpu_s(), time.monotonic()
        proc = subprocess.run(["bash", "-c", own_kernel_block() if own_kernel else command_one()], cwd=root,
                              capture_output=True, text=True, env=env, timeout=1800)
        wall, cpu = time.monotonic() - t0, busy_cpu_s() - cpu0
    rec = {"rev": rev, "commit": sha, "rc": proc.returncode, "wall_s": round(wall, 1), "machine_cpu_s": round(cpu, 1),
           "tail": proc.stdout.strip().splitlines()[-4:]}
    if own_kernel:  # each command line's seconds, from the block-line marks on stderr
        rec["lines_s"] = [round(float(end) - float(start), 1) for start, end in
                          re.findall(r"^block-line ([\d.]+) ([\d.]+)$", proc.stderr, re.M)]
        if proc.returncode:
            rec["stderr_tail"] = proc.stderr.strip().splitlines()[-6:]
    return rec


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("revs", nargs="*", default=["HEAD"], help="revisions of this repository (default: HEAD)")
    ap.add_argument("--own-kernel", action="store_true",
                    help='run the README\'s "Your own kernel" block as written instead of command 1')
    args = ap.parse_args()
    rc = 0
    for rev in args.revs:
        rec = run(rev, args.own_kernel)
        print(json.dumps(rec), flush=True)
        rc = rc or rec["rc"]
    return rc


if __name__ == "__main__":
    sys.exit(main())
