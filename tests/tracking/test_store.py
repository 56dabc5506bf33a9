"""tracking/store.py: a project's SQLite store is whole or absent, and MLflow's migrations run once per
MLflow version for a user (the empty store in ~/.cache/autogk/mlflow-stores), each later store a copy
of it with the project's own artifact root."""
from __future__ import annotations

import sqlite3
from pathlib import Path

from autogk_git.tracking import store


def default_root(db: Path) -> str:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT artifact_location FROM experiments WHERE experiment_id = 0").fetchone()[0]


def usable(db: Path) -> list[str]:
    """MLflow opens the store and files an experiment and a run in it."""
    from mlflow.tracking import MlflowClient
    c = MlflowClient(tracking_uri=f"sqlite:///{db}")
    e = c.create_experiment("autogk/x", artifact_location=(db.parent / "x").as_uri())
    c.log_metric(c.create_run(e).info.run_id, "geomean_latency_us", 1.0)
    return sorted(x.name for x in c.search_experiments())


def test_the_second_store_is_a_copy_with_its_own_artifact_root(tmp_path, own_cache, monkeypatch):
    a, b = tmp_path / "a" / "mlflow.db", tmp_path / "b" / "mlflow.db"
    for db in (a, b):
        db.parent.mkdir()
    store._build_sqlite_store(a, tmp_path / "a" / "artifacts")
    assert [p.name for p in (own_cache / "mlflow-stores").iterdir()] == [store._empty_store_path().name]

    def no_migrations(*args):
        raise AssertionError("MLflow's migrations ran again for a second store")
    monkeypatch.setattr(store, "_migrate", no_migrations)
    store._build_sqlite_store(b, tmp_path / "b" / "artifacts")
    assert default_root(a) == f"{tmp_path}/a/artifacts/0"
    assert default_root(b) == f"{tmp_path}/b/artifacts/0"   # not the first project's, nor the stand-in
    assert usable(b) == ["Default", "autogk/x"]
    assert not list(b.parent.glob(".*"))                      # nothing left of the build


def test_a_damaged_empty_store_is_built_again_not_copied(tmp_path, own_cache):
    empty = store._empty_store_path()  # own_cache made its folder
    empty.write_bytes(b"SQLite format 3\x00" + b"\x01" * 4000)  # a header, then garbage
    db = tmp_path / "mlflow.db"
    store._build_sqlite_store(db, tmp_path / "artifacts")
    assert default_root(db) == f"{tmp_path}/artifacts/0"
    assert usable(db) == ["Default", "autogk/x"]
    assert not empty.exists()                                  # the next store builds it again
    db2 = tmp_path / "two" / "mlflow.db"
    db2.parent.mkdir()
    store._build_sqlite_store(db2, tmp_path / "two" / "artifacts")
    assert empty.exists() and default_root(db2) == f"{tmp_path}/two/artifacts/0"


def test_a_cache_that_cannot_be_written_still_gives_a_store(tmp_path, own_cache):
    (own_cache / "mlflow-stores").rmdir()
    (own_cache / "mlflow-stores").write_text("a file where the folder goes\n")
    db = tmp_path / "mlflow.db"
    store._build_sqlite_store(db, tmp_path / "artifacts")
    assert usable(db) == ["Default", "autogk/x"]
    assert default_root(db) == f"{tmp_path}/artifacts/0"

