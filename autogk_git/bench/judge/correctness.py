"""Every label's correctness records for a job's workloads (checks.py judges one call): the candidate and the
parent side by side in judge threads of their own, each label on its own input sets, any other label after
the candidate; a record says which stress sets ran, and a harness failure is never a pass."""
from __future__ import annotations

import threading
import time

from .calls import KernelFailure, classify, die_if_context_lost, short_tb
from .checks import check_workload, first_trial
from .inputs import HarnessFailure, Inputs
from .kernels import RemoteKernel, arm
from .status import Status


def correctness_record(label: str, run, load_error, i: int, wl: dict, job: dict, inputs: Inputs, reference,
                       device: str) -> dict:
    t0 = time.perf_counter()
    rec = {"event": "done", "label": label, "uuid": wl["uuid"]}
    if load_error:
        rec.update(status=load_error[0], message=load_error[1])
    else:
        arm(run)
        ran: dict = {}
        try:
            light = label == "parent" and bool(job.get("settings", {}).get("parent_light"))
            rec.update(status=Status.PASSED, **check_workload(run, i, wl, job, inputs, reference, device, light,
                                                                     ran, first_trial(label)))
        except KernelFailure as e:
            rec.update(status=e.status, message=str(e))
        except HarnessFailure as e:  # never a pass: the kernel was not judged
            rec.update(status=Status.HARNESS_ERROR, message=str(e))
        except Exception as e:  # noqa: BLE001
            die_if_context_lost(e, device)
            rec.update(status=classify(e), message=short_tb(e))
        rec.update(ran)  # which stress sets ran (also on a failure: what was tried before it)
    rec["check_s"] = round(time.perf_counter() - t0, 4)
    return rec


def check_all(kernels: dict, job: dict, inputs: Inputs, reference, device: str, only, emit,
              emit_done: bool) -> dict[str, dict]:
    """Correctness records for every (label, workload) asked for. Labels in their own processes are
    checked in their own judge threads (the judge mostly waits on them): the candidate and the parent (on
    sets of its own, first_trial) side by side, any other label (tests) after the candidate; in-process
    ones one after the other, the candidate's first."""
    recs: dict[str, dict] = {}
    errors: list[BaseException] = []

    def one(label: str, run, load_error) -> None:
        try:
            for i, wl in enumerate(job["workloads"]):
                key = f"{label}:{wl['uuid']}"
                if only is not None and key not in only:
                    continue
                emit(event="start", label=label, uuid=wl["uuid"])
                recs[key] = correctness_record(label, run, load_error, i, wl, job, inputs, reference, device)
                if emit_done:
                    emit(**recs[key])
                else:  # final after the timed rounds; meanwhile the user sees the checks go by
                    emit(event="checked", label=label, uuid=wl["uuid"], status=str(recs[key]["status"]))
        except BaseException as e:  # noqa: BLE001 - re-raised in the judge's main thread
            errors.append(e)

    remote = [v for v in kernels.values() if isinstance(v[0], RemoteKernel) or v[1]]
    if len(kernels) > 1 and len(remote) == len(kernels):
        # A label on the candidate's sets runs after it: side by side, a candidate could wait for that
        # label's outputs on the same inputs (left in a buffer shared through /dev/shm by a kernel made for
        # it) and copy them, passing checks its own code fails. The parent's sets are its own.
        waves = [[lb for lb in kernels if lb == "candidate" or first_trial(lb)],
                 [lb for lb in kernels if lb != "candidate" and not first_trial(lb)]]
        for wave in (w for w in waves if w):
            threads = [threading.Thread(target=one, args=(label, *kernels[label]), name=f"judge-{label}")
                       for label in wave]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    else:
        for label in sorted(kernels, key=lambda lb: lb != "candidate"):  # the candidate's first here too
            one(label, *kernels[label])
    if errors:
        raise errors[0]
    return recs
