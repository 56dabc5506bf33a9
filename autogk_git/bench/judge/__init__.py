"""The judge: the files that run on the GPU machine, shipped there whole as one package (`runner.py`
copies them to the job's folder as `autogk_judge/`). Standard library, torch and triton only; nothing
of autogk outside this folder. Its rooms:

    process.py         the judge's process: one job, its phases, the progress record
    checks.py          correctness: poisoned outputs, comparisons, calls that catch kernels that remember
    correctness.py     every label's correctness records, the candidate and the parent side by side
    rounds.py          the paired timing rounds: every workload, both labels, round after round
    label_window.py    one label's timed window, and the check of what its timed calls wrote
    sampling.py        which timed calls are read, and the unread ones against the parent's
    witness.py         the judge's own clock around each timed window (the figure that decides)
    clock.py           that clock read: per-call figures of a pair, and when they condemn a label
    tenants.py         who else runs on the GPU (NVML), named in a failure the judge's clock made
    inputs.py          fresh inputs, the reference's outputs, the bytes a workload must move
    kernels.py         the kernel processes seen from the judge: start, requests, limits, ending
    files.py           a kernel's files on disk, and the trusted import of them (the generator, tools)
    kernel_process.py  a kernel's own process: imports the kernel, answers the judge's requests
    forks.py           judges forked from the runner's template, kernel processes from the judge's starter
    calls.py           how a kernel is called and timed: the one module both processes import
    seal.py            the kernel process's fingerprint of what calls and times the kernel
    sandbox.py         the kernel process's Landlock domain: what it may read, write and signal
    interp.py          Triton's CPU interpreter patching triton.language once a launch, not once a helper call
    timer.py           the device timers (CUPTI, CUDA graphs, events)
    l2.py              the L2 between timed calls: the flush kernel, the persisting carve-out, a window's calls
    held.py            the timer's own objects (profiler, CUDA events) held through a timed window
    rules.py           how outputs are judged: exact, tolerance, top-k set by score
    stress.py          stress input sets (scaled rows, outliers, zero rows) and unlisted shapes
    axes.py            the workloads' axis values, without torch (the loop's process asks for them)
    stats.py           intervals and the sequential stopping rule
    phases.py          the job's wall seconds by phase (the ab summary's `phases`)
    status.py          every status a kernel can get
    hygiene.py         environments, secrets, process trees and signals
    folders.py         a job's temp folders, its pids, the shared memory they leave; the sweep
    launch.py          the command line that starts a judge module as a process
    profiling.py       cProfile when asked

Imports inside are relative, so the package runs as `autogk_git.bench.judge` from a checkout and as
`autogk_judge` where it is shipped. This file imports nothing: the kernel's process imports the
package too.
"""
