"""flashinfer-bench: the only module that imports it (lazily; it pulls in torch)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autogk_git.errors import TargetError


def available() -> bool:
    import importlib.util
    return importlib.util.find_spec("flashinfer_bench") is not None


def accepted_dir() -> Path:
    """~/.cache/autogk/fib-accepted: one empty file per content flashinfer-bench's models accepted."""
    from autogk_git.env import user_cache
    return user_cache() / "fib-accepted"


def validate(definition: dict[str, Any], workloads: list[dict[str, Any]]) -> str:
    """Check a definition and its workloads with flashinfer-bench's own models; say what was checked.

    Importing flashinfer-bench imports torch (~1.5 s of a bundled example's ~10 s `init` on a 2-core CPU): what
    its models accepted once (the same definition and workloads, the same flashinfer-bench and pydantic)
    is remembered in the user's cache and not checked again. A rejection is never remembered."""
    if not available():
        return ("flashinfer-bench is not installed: checked the definition's structure only "
                "(pip install --no-deps flashinfer-bench==0.1.2 pydantic docstring-parser)")
    import hashlib
    from importlib.metadata import version
    try:
        versions = [version("flashinfer-bench"), version("pydantic")]
    except Exception:  # noqa: BLE001 - no metadata (a source checkout): checked every time
        versions = None
    said = f"flashinfer-bench accepts the definition and {len(workloads)} workload(s)"
    mark = None
    if versions is not None:
        content = json.dumps([versions, definition, workloads], sort_keys=True).encode()
        mark = accepted_dir() / hashlib.sha256(content).hexdigest()
        if mark.exists():
            return said
    from flashinfer_bench.data import Definition, Workload
    from pydantic import ValidationError
    try:
        Definition.model_validate(definition)
    except ValidationError as e:
        raise TargetError(f"flashinfer-bench rejects the definition {definition.get('name')}:\n{e}",
                          "fix the definition JSON") from None
    for w in workloads:
        try:
            Workload.model_validate(w)
        except ValidationError as e:
            raise TargetError(f"flashinfer-bench rejects workload {w.get('uuid')}:\n{e}",
                              "fix that workload line") from None
    if mark is not None:
        try:
            mark.parent.mkdir(parents=True, exist_ok=True)
            mark.touch()
        except OSError:  # a read-only cache: checked again next time
            pass
    return said


def pack_solution(definition_name: str, sources: dict[str, str], name: str, author: str,
                  description: str, entry_point: str = "kernel.py::run") -> dict[str, Any]:
    """A Solution JSON built by flashinfer-bench's own packer and checked again by its model."""
    if not available():
        raise TargetError("flashinfer-bench is not installed, so its packer cannot check the Solution",
                          "pip install --no-deps flashinfer-bench==0.1.2 pydantic docstring-parser")
    import tempfile
    from pathlib import Path

    from flashinfer_bench.agents.solution_handler import pack_solution_from_files
    from flashinfer_bench.data import BuildSpec, Solution
    from pydantic import ValidationError

    if entry_point.split("::")[0] not in sources:
        raise TargetError(f"the entry point {entry_point} names a file the kernel does not have",
                          f"files: {', '.join(sorted(sources))}")
    spec = BuildSpec(language="triton", target_hardware=["cuda"], entry_point=entry_point,
                     dependencies=[], destination_passing_style=True)
    with tempfile.TemporaryDirectory() as d:
        for rel, text in sources.items():
            (Path(d) / rel).write_text(text)
        try:
            sol = pack_solution_from_files(d, spec, name=name, definition=definition_name, author=author,
                                           description=description)
        except (ValueError, ValidationError) as e:
            raise TargetError(f"flashinfer-bench's packer rejects the kernel: {e}",
                              "the kernel's files must be flat .py files beside kernel.py") from None
    data = sol.model_dump(mode="json")
    Solution.model_validate_json(json.dumps(data))  # what a reader of the file will do
    return data
