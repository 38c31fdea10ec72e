"""optuna-dashboard opens knobtune's studies as they are: knob names as params, our attributes visible."""

from __future__ import annotations

import json
from wsgiref.util import setup_testing_defaults

import pytest

from knobtune.tuning import Tuner, Experiment, build_space

from conftest import tiny

optuna_dashboard = pytest.importorskip("optuna_dashboard", reason="optuna-dashboard is a test dependency")


def _get(app, path: str) -> dict:
    environ: dict = {}
    setup_testing_defaults(environ)
    environ.update(PATH_INFO=path, REQUEST_METHOD="GET")
    status: list[str] = []
    body = b"".join(app(environ, lambda s, headers, exc_info=None: status.append(s)))
    assert status == ["200 OK"], body[:300]
    return json.loads(body)


@pytest.mark.slow
def test_dashboard_reads_our_study(rocksdb, store) -> None:
    workload = tiny("put-get-delete", 3000)
    settings = Experiment.of(study="dash", catalog=rocksdb, workload=workload, space=build_space(rocksdb),
                             search__sampler="random", budget__trials=3, proof__verify_top=0, proof__repeats=0,
                             research__rules=False, research__try_known_configs=False)
    Tuner(settings, store).run()
    app = optuna_dashboard.wsgi(store.storage())
    summaries = _get(app, "/api/studies")["study_summaries"]
    assert [s["study_name"] for s in summaries] == ["dash"]
    detail = _get(app, f"/api/studies/{summaries[0]['study_id']}")
    study_attrs = {a["key"] for a in detail["user_attrs"]}
    assert {"system", "workload", "default_by_rung", "left_out_unsafe", "machine"} <= study_attrs
    baseline = detail["trials"][0]
    assert {"key": "role", "value": "default"} in baseline["user_attrs"]
    params = {p["name"] for trial in detail["trials"] for p in trial["params"]}
    assert "write_buffer_size" in params  # knob names exactly as the system spells them
    trial_attrs = {a["key"] for trial in detail["trials"][1:] for a in trial["user_attrs"]}
    assert {"outcome", "rung_0", "config", "config_hash"} <= trial_attrs
