"""What a RocksDB user writes today instead of knobtune: a one-off Optuna script around db_bench.

Random sampling over 25 db_bench knobs, successive halving over three sizes,
elapsed time as the objective, no check of what the reads found: the kind of
script the published RocksDB study describes and issue 9 tried. It writes its
best config as a knobtune config file, so the two can be compared side by side:

    .venv/bin/python bench/handwritten_optuna.py --time 8m --out handwritten-best.json
    .venv/bin/knobtune compare rocksdb --workload put-get-delete --repeats 5 \\
        --config default --config handwritten-best.json --config study:NAME --dir bench/studies

It is a benchmark baseline, not part of knobtune: it deliberately does what
such scripts do (and so falls into the traps knobtune guards against).
``bench/peers.py`` runs the same search (``search``) over knobtune's own
knobs and runs instead, so that only the search differs from knobtune's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import optuna

from knobtune.knobs import load_catalog
from knobtune.tuning.search import mend

SIZES = [5_000, 20_000, 100_000]
Config = TypeVar("Config")
KNOBS = {  # flag: (kind, low, high) or (kind, choices)
    "write_buffer_size": ("int_log", 1 << 20, 1 << 30),
    "max_write_buffer_number": ("int", 1, 16),
    "min_write_buffer_number_to_merge": ("int", 1, 8),
    "level0_file_num_compaction_trigger": ("int", 1, 64),
    "level0_slowdown_writes_trigger": ("int", 1, 128),
    "level0_stop_writes_trigger": ("int", 1, 256),
    "max_background_jobs": ("int", 1, 16),
    "subcompactions": ("int", 1, 8),
    "max_bytes_for_level_base": ("int_log", 16 << 20, 4 << 30),
    "max_bytes_for_level_multiplier": ("float", 2.0, 20.0),
    "target_file_size_base": ("int_log", 2 << 20, 1 << 30),
    "num_levels": ("int", 2, 10),
    "compaction_style": ("cat", ["0", "1", "2"]),  # level, universal, fifo: a script sees three numbers
    "compression_type": ("cat", ["none", "snappy", "lz4", "zstd"]),
    "block_size": ("int_log", 1 << 10, 256 << 10),
    "cache_size": ("int_log", 1 << 20, 8 << 30),
    "bloom_bits": ("int", 0, 24),
    "cache_index_and_filter_blocks": ("cat", ["true", "false"]),
    "bytes_per_sync": ("int_log", 64 << 10, 64 << 20),
    "compaction_readahead_size": ("int_log", 64 << 10, 16 << 20),
    "use_direct_reads": ("cat", ["true", "false"]),
    "use_direct_io_for_flush_and_compaction": ("cat", ["true", "false"]),
    "advise_random_on_open": ("cat", ["true", "false"]),
    "table_cache_numshardbits": ("int", 1, 10),
    "disable_auto_compactions": ("cat", ["true", "false"]),
}
KNOBTUNE_VALUES = {"compaction_style": {"0": "level", "1": "universal", "2": "fifo"}}


def suggest(trial: optuna.Trial) -> dict[str, str]:
    flags = {}
    for name, spec in KNOBS.items():
        kind = spec[0]
        if kind == "cat":
            flags[name] = trial.suggest_categorical(name, spec[1])
        elif kind == "float":
            flags[name] = str(trial.suggest_float(name, spec[1], spec[2]))
        else:
            flags[name] = str(trial.suggest_int(name, spec[1], spec[2], log=kind == "int_log"))
    return flags


def run_db_bench(flags: dict[str, str], num: int, timeout_s: float | None) -> float:
    db = tempfile.mkdtemp(prefix="handwritten-")
    argv = ["db_bench", f"--db={db}", "--benchmarks=filluniquerandom,readrandom,deleterandom", f"--num={num}",
            "--key_size=16", "--value_size=10240", "--seed=42", "--progress_reports=false"]
    argv += [f"--{k}={v}" for k, v in flags.items()]
    started = time.monotonic()
    try:
        subprocess.run(argv, check=True, capture_output=True, timeout=timeout_s)
    finally:
        shutil.rmtree(db, ignore_errors=True)
    return time.monotonic() - started


class RunFailed(Exception):
    """A run that crashed, was refused or took too long: such a script prunes the trial and moves on."""


class OutOfTime(Exception):
    """The budget has no room for the next run: the study stops (used when another harness keeps the time)."""


def search(suggest: Callable[[optuna.Trial], Config], run: Callable[[Config, int], float], steps: int,
           timeout_s: float, seed: int, direction: str = "minimize") -> optuna.Study:
    """The script's search: random sampling, Optuna's successive halving over ``steps`` sizes, for ``timeout_s``.

    ``run(config, step)`` measures one config at size ``step`` and raises RunFailed (or OutOfTime) instead.
    """
    def objective(trial: optuna.Trial) -> float:
        config = suggest(trial)
        value = 0.0
        for step in range(steps):
            try:
                value = run(config, step)
            except RunFailed:
                raise optuna.TrialPruned() from None
            except OutOfTime:
                trial.study.stop()
                raise optuna.TrialPruned() from None
            trial.report(value, step)
            if step < steps - 1 and trial.should_prune():
                raise optuna.TrialPruned()
        return value

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.RandomSampler(seed=seed),
                                pruner=optuna.pruners.SuccessiveHalvingPruner())
    study.optimize(objective, timeout=timeout_s)
    return study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--time", default="8m", help="budget, e.g. 8m or 480")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    budget_s = float(args.time[:-1]) * 60 if args.time.endswith("m") else float(args.time)
    default_s = [run_db_bench({}, num, None) for num in SIZES]

    def run(flags: dict[str, str], step: int) -> float:
        try:
            return run_db_bench(flags, SIZES[step], timeout_s=3 * default_s[step])
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            raise RunFailed() from None

    study = search(suggest, run, len(SIZES), budget_s, args.seed)
    best = study.best_trial
    config = {k: KNOBTUNE_VALUES.get(k, {}).get(v, v) for k, v in suggest(optuna.trial.FixedTrial(best.params)).items()}
    if config.get("compaction_style") == "fifo":
        config["fifo_compaction_max_table_files_size_mb"] = 0  # what db_bench ran with: the flag's default
    # As a knobtune config: level-0 triggers mended the way RocksDB sanitizes them when it opens the database.
    catalog = load_catalog("rocksdb")
    full, _ = mend(catalog, catalog.defaults() | {k: catalog.knobs[k].parse(v) for k, v in config.items()})
    args.out.write_text(json.dumps(catalog.changed(full), indent=2) + "\n")
    states = [t.state.name for t in study.trials]
    print(f"trials: {len(states)} ({states.count('COMPLETE')} complete, {states.count('PRUNED')} pruned); "
          f"default {default_s[-1]:.2f} s, best single run {best.value:.2f} s "
          f"({default_s[-1] / best.value:.2f}x); compaction_style={config['compaction_style']}; wrote {args.out}")


if __name__ == "__main__":
    main()
