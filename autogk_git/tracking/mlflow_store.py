"""MLflow runs: the names callers ask for, each kept in the room of its concern. Result notes are the
source of truth; MLflow mirrors them.

One MLflow experiment per target (`autogk/<target>`), one run per autogk experiment, found again by
its `autogk.commit` tag so that logging twice (the loop, then `autogk sync`) updates, never duplicates.

store.py     the store: probe a server, open a client, build the SQLite store whole, the experiments
             runs are filed under, what a failure means, the `mlflow server` command line
run_data.py  what one run holds, from the note alone: name, tags, params, metrics, time window
runs.py      logging: one result's run, a report's and a loop's runs, superseded runs
sync.py      many results at once (`autogk sync`): what is unlogged, bulk logging

With traces.py these are the only modules that import mlflow (tests/tracking/test_tracking_traces.py).
"""
from __future__ import annotations

from autogk_git.tracking.run_data import (TAG_COMMIT, bench_window, key_figures, metrics_of, run_name,
                                          run_params, run_tags, trace_of)
from autogk_git.tracking.runs import (TAG_SUPERSEDED, complete_run, find_run, is_logged, link_trace, live,
                                      log_loop, log_report, log_result, supersede, tag_picked_run)
from autogk_git.tracking.store import (BUILDING, HTTP_LIMITS, PROBE_TIMEOUT_S, SIDE_KINDS, VIEW_COLUMNS,
                                       VIEW_KEY, VIEW_TAG, check, describe_error, experiment_for,
                                       experiment_id, experiment_name, open_client, probe, server_command,
                                       side_experiment, store_unreachable, target_experiment, view_state)
from autogk_git.tracking.sync import SYNC_CHUNK, log_results, logged_commits, unlogged

# The names these had when they lived in one module (tests and callers still reach for them).
_client = open_client
_experiment_id = experiment_id
_tags = run_tags

__all__ = ["TAG_COMMIT", "bench_window", "key_figures", "metrics_of", "run_name", "run_params", "run_tags",
           "trace_of", "TAG_SUPERSEDED", "complete_run", "find_run", "is_logged", "link_trace", "live",
           "log_loop", "log_report", "log_result", "supersede", "tag_picked_run", "BUILDING", "HTTP_LIMITS",
           "PROBE_TIMEOUT_S", "SIDE_KINDS", "VIEW_COLUMNS", "VIEW_KEY", "VIEW_TAG", "check", "describe_error",
           "experiment_for", "experiment_id", "experiment_name", "open_client", "probe", "server_command",
           "side_experiment", "store_unreachable", "target_experiment", "view_state", "SYNC_CHUNK",
           "log_results", "logged_commits", "unlogged"]
