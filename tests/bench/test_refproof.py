"""bench/refproof.py as a CLI process meets it: a proof already made costs that process no torch import."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import DATA, REPO

RIGHT = "import torch\n\n\ndef run(x, bias, scale):\n    return torch.addcmul(bias, x, torch.tensor(scale))\n"

CHECK_TWICE = r"""
import json, sys
from pathlib import Path
from autogk_git.bench import refproof
folder = Path(sys.argv[1])
definition = json.loads((folder / "definition.json").read_text())
workloads = [json.loads(l)["workload"] for l in (folder / "workloads.jsonl").read_text().splitlines()]
for _ in range(2):  # the first proves (in a process of its own), the second reads the record
    line = refproof.check(definition, workloads, folder, None, str(folder / "definition.json"), 60, 1 << 20)
print(json.dumps({"line": line, "torch": "torch" in sys.modules}))
"""


@pytest.mark.skipif(any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/dxg")), reason="a machine with a GPU")
def test_a_cached_proof_is_read_without_importing_torch_on_a_machine_without_a_gpu(tmp_path):
    folder = tmp_path / "scale"
    folder.mkdir()
    for name in ("definition.json", "workloads.jsonl"):
        (folder / name).write_text((DATA / "scale" / name).read_text())
    (folder / "reference.py").write_text(RIGHT)
    out = subprocess.run([sys.executable, "-c", CHECK_TWICE, str(folder)], capture_output=True, text=True,
                         cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "proven equal to the definition's on all 5 workload(s) (cpu" in got["line"], got["line"]
    assert got["torch"] is False
