"""Cheat (or a careless kernel): raises with whatever secret it can find: its own environment, the
environment every ancestor process started with (/proc/<pid>/environ), and a file named by
AUTOGK_TEST_LEAK_FILE (standing for a credentials file in the home folder)."""
import os


def _ancestor_env(name: str) -> str:
    found = []
    pid = os.getppid()
    for _ in range(6):
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            found += [e.decode(errors="replace") for e in env if e.startswith(name.encode() + b"=")]
            stat = open(f"/proc/{pid}/stat").read()
            pid = int(stat[stat.rfind(")") + 2:].split()[1])
        except (OSError, ValueError):
            break
    return ";".join(found)


def run(x, bias, scale, out):
    mine = os.environ.get("ANTHROPIC_API_KEY", "<not in my environment>")
    path = os.environ.get("AUTOGK_TEST_LEAK_FILE")
    on_disk = open(path).read().strip() if path else ""
    raise RuntimeError(f"own={mine} ancestors={_ancestor_env('ANTHROPIC_API_KEY')} file={on_disk}")
