"""Checking one revision's kernel outside any experiment (`autogk bench`, the baseline `autogk init`
takes), and saying up front which workloads the configured backend cannot run for size."""
from __future__ import annotations

from typing import Any

from autogk_git.errors import AutogkError
from autogk_git.git import repo
from autogk_git.project import Project, Target, require_input_data


def check_kernel(project: Project, target: Target, rev: str, say, backend_name: str | None = None,
                 parent: str | None = None) -> dict[str, Any]:
    """Run the stages on the kernel at rev (timed against parent's when given); the result, with its commit."""
    # The backends and stages import torch: loaded here, so commands that import this module stay fast.
    from autogk_git.bench.backends import get_backend
    from autogk_git.bench.stages import benchmark
    from autogk_git.loop.verdict import first_failure
    from autogk_git.record.kernels import sources_at

    require_input_data(target)
    sha = repo.rev(project.root, rev)
    if not sha:
        raise AutogkError(f"'{rev}' is not a commit", "pass a branch, tag or sha")
    backend = get_backend(backend_name or project.config.bench.backend, project.config)
    say(f"checking {target.name} at {sha[:10]} on the {backend.name} backend")
    parent_sources = sources_at(project.root, target, parent) if parent else None
    res = benchmark(target, backend, sources_at(project.root, target, sha), parent_sources, project.config,
                    seed=int(sha[:8], 16), progress=say)
    fail = first_failure(res)
    res["commit"] = sha
    n = len(res.get("checked_workloads", []))
    if fail:
        say(f"INCORRECT in {fail[0]} on workload {fail[1][:8]}: {fail[2][:300]}")
    elif res.get("error"):
        say(f"not checked: {res['error']}")
    else:
        extra = "" if res["timing"] else " (no timing on this backend)"
        say(f"correct on {n} workload(s){extra}; skipped {len(res.get('skipped', []))} for size")
    return res


def check_reference(project: Project, target: Target, cache: bool = False, prove: bool = True) -> str:
    """The target's reference run and checked on its smallest workload (bench/refcheck.py): a TargetError
    naming its definition file when broken. cache: skip a definition, generator and workloads already
    passed in this repository (the loop checks when the trunk's definition changes, not every run), and
    return "" then. prove: also prove the fast reference (reference.py) where its proof is not cached
    (init, bench and iterate do; doctor does not: seconds of both references on every CPU workload)."""
    from autogk_git.bench import proofs, refcheck, refproof
    if target.inputs_needing_data():
        return "reference not checked ahead: some integer inputs need data"
    generator = target.generator_source()
    key = proofs.content_key(target.definition, target.workloads, generator)
    mark = project.state_dir / "reference-checked" / key
    where = str(target.dir / "definition.json")
    if project.state_dir / "trunk-targets" in target.dir.parents:  # the trunk's copy: name it as git does
        where = f"{project.trunk}:{target.rel}/definition.json"
    line = ""
    if not (cache and mark.exists()):
        line = refcheck.check(target.definition, target.workloads, where,
                              project.config.bench.reference_timeout_s, generator, target.dir)
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.write_text(line + "\n")
    # The fast reference (reference.py), proven against the definition's whenever one of the files
    # changes (its record is cached by their content): the judge uses it only once proven.
    if not prove:
        return line
    proof = refproof.check(target.definition, target.workloads, target.dir, generator, where,
                           project.config.bench.reference_timeout_s, project.config.bench.cpu_max_numel,
                           cache=True)
    return "\n".join(x for x in (line, proof) if x)


def trunk_target(project: Project, target: Target) -> Target:
    """The target as the trunk holds it (the checkout's while the trunk does not exist yet); a TargetError
    with the fix when the trunk lacks it (committed on another branch)."""
    from autogk_git.project import configured_target
    from autogk_git.record import kernels, refs, trunk
    tip = repo.rev(project.root, refs.branch(project.trunk))
    if tip is None:
        return target
    if kernels.trees(project.root, [tip], target.rel).get(tip) is None:
        here = repo.current_branch(project.root) or "HEAD"
        raise AutogkError(f"target {target.name} ({target.rel}/) is not on the trunk {project.trunk}: experiments "
                          f"branch from the trunk, so there is nothing to start from (it is in this checkout, on {here})",
                          f"bring it onto the trunk: git switch {project.trunk} && git checkout {here} -- {target.rel} && "
                          f"git commit -m 'add target {target.name}'  (then: autogk iterate --target {target.name})")
    return configured_target(project.config, target.name, trunk.snapshot(project, target.rel, tip))


def size_lines(project: Project, target: Target) -> list[str]:
    """Workloads the configured backend cannot run for size (the CPU interpreter's cpu_max_numel), said
    up front: a target none of whose workloads fit would otherwise look like a loop with nothing to do."""
    from autogk_git.bench.backends import get_backend
    from autogk_git.bench.job import numel, over_limit_summary
    try:
        backend = get_backend(project.config.bench.backend, project.config)
    except Exception:  # noqa: BLE001 - a backend that cannot be set up here is doctor's to report
        return []
    limit = getattr(backend, "max_numel", None)
    if limit is None:
        return []
    sizes = [numel(target.definition, w) for w in target.workloads]
    over = sorted(n for n in sizes if n > limit)
    if not over:
        return []
    # The number to raise the limit to admits every workload skipped, not only the smallest of them.
    fix = (f"run the loop on a GPU (`iterate --backend local`, or `--backend modal`), or raise the limit: "
           f"AUTOGK_BENCH_CPU_MAX_NUMEL={over[-1]} or `cpu_max_numel = {over[-1]}` under [bench] in .autogk.toml "
           "(the CPU interpreter is slow at that size)")
    words = over_limit_summary(over, limit)
    if len(over) == len(sizes):
        return [f"warning: none of the {len(sizes)} workload(s) can run on the {backend.name} backend: "
                f"{words}; {fix}"]
    return [f"note: {len(over)} of {len(sizes)} workload(s) are skipped on the {backend.name} backend, "
            f"{words}; to check them too: {fix}"]
