"""The experiment loop: lifecycle, verdict policy, resume."""
