"""SLURM backend: each benchmark job is one `sbatch` job; the same worker runs inside it.

    cluster.py   the only code that starts a SLURM command (sbatch, squeue, scancel, sinfo, scontrol)
    backend.py   SlurmBackend: job folder, submit (or find the job an earlier run left), wait, faults
    job_main.py  what the SLURM job runs: the local (GPU) or interpret (CPU) backend on the job
"""
