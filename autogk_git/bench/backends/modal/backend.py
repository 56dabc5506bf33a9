"""Modal backend: the same worker on the same job, in a Modal container ([modal] gpu, B200 by default).

Checks that need no network come first and fail in milliseconds: a token must be configured (the
environment or ~/.modal.toml) and Modal's API host must accept a TCP connection; only then is
`modal` imported (in autogk_git.bench.backends.modal.app) and called, with a deadline on the first answer. Small
safetensors blobs travel inside the call; larger ones through the [modal] volume.
"""
from __future__ import annotations

import base64
import hashlib
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from autogk_git import env
from autogk_git.bench.job import timed_settings
from autogk_git.errors import BenchError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_SERVER = "https://api.modal.com"
TOKEN_HINT = ("run `modal token new` (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET in the environment), "
              "then `autogk doctor`")


def _modal_profile(environ: env.Environ | None) -> dict[str, Any]:
    """The active profile of Modal's config file (MODAL_CONFIG_PATH or ~/.modal.toml); {} if none."""
    path = env.modal_config_path(environ)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}
    profiles = {k: v for k, v in data.items() if isinstance(v, dict)}
    name = env.modal_profile(environ)
    if not name:
        active = [k for k, v in profiles.items() if v.get("active")]
        name = active[0] if active else (next(iter(profiles)) if len(profiles) == 1 else "")
    prof = dict(profiles.get(name, {}))
    if prof:
        prof["_where"] = f"{path} (profile {name})"
    return prof


def token_source(environ: env.Environ | None = None) -> str | None:
    """Where Modal's credentials come from ('environment', '<file> (profile p)'), or None. No network."""
    if env.modal_token_in_environment(environ):
        return "environment"
    prof = _modal_profile(environ)
    if prof.get("token_id") and prof.get("token_secret"):
        return prof["_where"]
    return None


def server_url(environ: env.Environ | None = None) -> str:
    return env.modal_server_url(environ) or _modal_profile(environ).get("server_url") or DEFAULT_SERVER


def preflight(config, environ: env.Environ | None = None) -> str:
    """Fail fast, without Modal's client: no token, or its API host not reachable. Returns the token source."""
    source = token_source(environ)
    if not source:
        raise BenchError("the modal backend needs a Modal token, and none is configured", TOKEN_HINT)
    url = urlparse(server_url(environ))
    host = url.hostname or "api.modal.com"
    port = url.port or (443 if url.scheme in ("https", "grpcs") else 80)
    try:
        socket.create_connection((host, port), timeout=min(5.0, float(config.modal.connect_timeout_s))).close()
    except OSError as e:
        raise BenchError(f"cannot reach Modal at {host}:{port} ({e.strerror or e})",
                         "check the network (or MODAL_SERVER_URL), then `autogk doctor`; "
                         "or run with --backend local / interpret") from None
    return source


def blob_files(definition: dict[str, Any], workloads: list[dict[str, Any]], root: Path) -> dict[str, Path]:
    """Relative path -> local file of every safetensors blob the workloads read."""
    out: dict[str, Path] = {}
    for wl in workloads:
        for spec in wl.get("inputs", {}).values():
            if spec.get("type") == "safetensors":
                p = Path(spec["path"])
                out[spec["path"]] = p if p.is_absolute() else root / p
    return out


class ModalBackend:
    name = "modal"
    timing = True

    def __init__(self, config) -> None:
        self.config = config

    def eligible(self, definition: dict[str, Any], workloads: list[dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        # Every workload fits a datacenter GPU; blobs are checked when the job is packed.
        return list(workloads), []

    def _pack_blobs(self, job: dict[str, Any]) -> tuple[dict[str, str] | None, str | None, dict[str, Any]]:
        """(inline blobs, blob dir on the Volume, job with relative blob paths)."""
        root = Path(job.get("blob_root") or ".")
        files = blob_files(job["definition"], job["workloads"], root)
        if not files:
            return None, None, job
        for rel, p in files.items():
            if not p.is_file():
                raise BenchError(f"workload blob {p} does not exist", "fetch the target's blobs, or fix workloads.jsonl")
        size = sum(p.stat().st_size for p in files.values())
        if size <= self.config.modal.inline_blobs_mb * (1 << 20):
            return {rel: base64.b64encode(p.read_bytes()).decode() for rel, p in files.items()}, None, job
        if not self.config.modal.volume:
            raise BenchError(f"the job's blobs total {size >> 20} MiB, over [modal] inline_blobs_mb = "
                             f"{self.config.modal.inline_blobs_mb}, and no [modal] volume is set",
                             "set [modal] volume = \"autogk-blobs\" (or raise inline_blobs_mb)")
        return None, self._upload(files), job

    def _upload(self, files: dict[str, Path]) -> str:
        """Put large blobs on the Volume under a content hash; returns their folder in the container."""
        from autogk_git.bench.backends.modal import app as modal_app
        h = hashlib.sha256()
        for rel in sorted(files):
            h.update(rel.encode())
            h.update(hashlib.sha256(files[rel].read_bytes()).digest())
        return modal_app.upload_blobs(self.config, files, h.hexdigest()[:16])

    def run(self, job: dict[str, Any], timeout_s: float, on_progress=None) -> dict[str, Any]:
        preflight(self.config)
        from autogk_git.bench.backends.modal import app as modal_app
        modal_app.connect(self.config)
        job = dict(job, settings={**job["settings"], **timed_settings(self.config)})
        blobs, blob_dir, job = self._pack_blobs(job)
        t0 = time.monotonic()
        out = modal_app.call(self.config, job, timeout_s, blobs=blobs, blob_dir=blob_dir)
        out["gpu_s"] = round(time.monotonic() - t0, 3)  # billed container time, queue included
        out["gpu"] = f"modal:{self.config.modal.gpu}"
        environment = out.setdefault("environment", {})
        environment["modal"] = {"app": self.config.modal.app, "gpu_requested": self.config.modal.gpu}
        if on_progress is not None:  # the container's progress stays there: report each status on return
            elapsed = out["gpu_s"]
            for label, wls in out.get("labels", {}).items():
                for uuid, rec in wls.items():
                    on_progress(label, uuid, rec.get("status", ""), elapsed)
        return out
