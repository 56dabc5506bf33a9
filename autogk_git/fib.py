"""flashinfer-bench: the only module that imports it (lazily; it pulls in torch)."""
from __future__ import annotations

from typing import Any

from autogk_git.errors import TargetError


def available() -> bool:
    import importlib.util
    return importlib.util.find_spec("flashinfer_bench") is not None


def validate(definition: dict[str, Any], workloads: list[dict[str, Any]]) -> str:
    """Check a definition and its workloads with flashinfer-bench's own models; say what was checked."""
    if not available():
        return ("flashinfer-bench is not installed: checked the definition's structure only "
                "(pip install --no-deps flashinfer-bench==0.1.2 pydantic docstring-parser)")
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
    return f"flashinfer-bench accepts the definition and {len(workloads)} workload(s)"
