"""Benchmark: does a small rung rank configs like the full size? (issue 17, item 3)

Successive halving keeps the best third of the trials at each rung; that is only better than random pruning if
a rung orders configs as the full size does. This bench samples configs from knobtune's own search space (the
default among them), measures every config at every candidate size through knobtune's own target (settled, the
same timeouts: 3x the default at that size), and reports for each size:

- Spearman's rho between its values and the full size's (failures ranked last at both);
- how many of the full size's best third survive when that size keeps its own best third (random keeps a third);
- the full size measured twice: rho between the two is the ceiling that noise allows.

Configs come from the search space at random, or (``--climbed-from``) from the complete trials of earlier studies:
the configs a study promotes, already good and close to each other, where a rung's ranking matters most. Each
small size runs as a study runs it (scaled rungs: the config's data-sized knobs at the size's share of the data)
or, with ``--scaling both``, both scaled and as it is.

Sizes are measured size-major, configs in a new shuffled order at each size, so the machine's drift is spread.

    .venv/bin/python bench/ladder.py --workload put-get-delete --configs 24 --fractions 0.05 0.1 0.2 0.33 0.5 1 \
        --out ladder-pgd.json   # the suite's: bench/run.py ladder
    .venv/bin/python bench/ladder.py --table bench/results/ladder/DAY-COMMIT.json
    .venv/bin/python bench/ladder.py --workload put-get-delete --configs 24 --fractions 0.05 0.2 1 --scaling both \
        --climbed-from sqlite:///STUDIES/studies.db --out scaled-pgd.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import tempfile
import time
from pathlib import Path

import optuna
from scipy.stats import spearmanr

from _cli import emit
from knobtune.knobs import load_catalog
from knobtune.storage import open_store
from knobtune.targets import RunFailure
from knobtune.systems import make_target, resolve_driver
from knobtune.tuning import build_space
from knobtune.tuning.document import DEFAULT_TIMEOUT_FACTOR, relative_limit_s
from knobtune.workloads import load_workload



def sample_configs(space, count: int, seed: int) -> list[dict]:
    """The default and ``count - 1`` configs drawn at random from ``space`` (relations mended, as a study does)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    configs = [space.catalog.defaults()]
    while len(configs) < count:
        trial = study.ask()
        configs.append(space.suggest(trial)[0])
        study.tell(trial, 0.0)
    return configs


def climbed_configs(urls: list[str], catalog, count: int) -> list[dict]:
    """The default and ``count - 1`` distinct configs that completed every rung in the studies at ``urls``, spread
    evenly over their full-size values (best to worst)."""
    found: dict[str, tuple[float, dict]] = {}
    for url in urls:
        for summary in optuna.get_all_study_summaries(url):
            study = optuna.load_study(study_name=summary.study_name, storage=url)
            for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
                if changed := trial.user_attrs.get("config"):
                    found.setdefault(json.dumps(changed, sort_keys=True), (trial.value, changed))
    ranked_configs = [changed for _, changed in sorted(found.values(), key=lambda item: item[0])]
    if len(ranked_configs) < count - 1:
        raise SystemExit(f"only {len(ranked_configs)} complete configs in {', '.join(urls)}; ask for fewer --configs")
    step = (len(ranked_configs) - 1) / max(1, count - 2)
    return [catalog.defaults()] + [catalog.config(ranked_configs[round(i * step)]) for i in range(count - 1)]


def measure(target, config: dict, rung, limit_s: float | None, objective, seed: int,
            log: Path) -> tuple[float | None, float | None]:
    """One settled run of ``config`` at ``rung`` (as given: the caller scales it or not), its objective value and
    time, or Nones when it failed."""
    try:
        measurement = target.run(config, rung, timeout_s=limit_s, log_path=log, seed=seed)
    except RunFailure as failure:
        print(f"  failed: {failure.reason[:120]}", flush=True)
        return None, None
    return measurement.value(objective), measurement.elapsed_s


def ranked(values: list[float | None], maximize: bool) -> list[float]:
    """Values to rank with failures last (worse than any measured value)."""
    worst = (min if maximize else max)(v for v in values if v is not None)
    penalty = worst * (0.5 if maximize else 2.0)
    return [penalty if v is None else v for v in values]


def survivors(small: list[float], full: list[float], maximize: bool) -> float:
    """Of the full size's best third, the fraction that the small size's best third keeps."""
    keep = max(1, len(full) // 3)

    def order(vs: list[float]) -> list[int]:
        return sorted(range(len(vs)), key=lambda i: vs[i], reverse=maximize)

    return len(set(order(small)[:keep]) & set(order(full)[:keep])) / keep


def run(args: argparse.Namespace) -> dict:
    catalog = load_catalog(args.system)
    workload = load_workload(args.workload)
    if args.records:
        workload = workload.scaled(args.records)
    workload = dataclasses.replace(workload, ladder=tuple(sorted(set(args.fractions))))
    driver = resolve_driver(catalog.system, args.driver)
    space = build_space(catalog, driver=driver)
    configs = (climbed_configs(args.climbed_from, catalog, args.configs) if args.climbed_from
               else sample_configs(space, args.configs, args.seed))
    maximize = workload.objective.maximize
    # (rung, scaled) in the order measured: each small rung as a study runs it (and as it is, with --scaling both),
    # then the full size twice
    small = [(rung, scaled) for rung in workload.rungs[:-1]
             for scaled in {"scaled": (True,), "unscaled": (False,), "both": (False, True)}[args.scaling]]
    sizes = small + [(workload.full, False), (dataclasses.replace(workload.full, index=len(workload.rungs)), False)]
    home = args.dir or Path(tempfile.mkdtemp(prefix="knobtune-ladder-"))
    values: dict[int, list[float | None]] = {}
    rng = random.Random(args.seed)
    started = time.monotonic()
    with make_target(catalog, workload, open_store(home).worker_scratch(), driver) as target:
        for rung, scaled in sizes:
            key = _key(rung.index, scaled)
            logs = home / f"rung-{key}"
            at = (lambda c: catalog.at_fraction(c, rung.fraction)) if scaled else (lambda c: c)
            default, default_s = measure(target, at(configs[0]), rung, None, workload.objective, args.seed,
                                         logs / "default.log")
            if default is None:
                raise SystemExit(f"the default failed at {rung}; see {logs}")
            limit = relative_limit_s(default_s, DEFAULT_TIMEOUT_FACTOR)
            row: list[float | None] = [default] + [None] * (len(configs) - 1)
            order = list(range(1, len(configs)))
            rng.shuffle(order)
            for i in order:
                row[i] = measure(target, at(configs[i]), rung, limit, workload.objective, args.seed,
                                 logs / f"config-{i}.log")[0]
            values[key] = row
            print(f"{rung}{' scaled' if scaled else ''}: {sum(v is None for v in row)} failed, "
                  f"{time.monotonic() - started:.0f} s so far", flush=True)
    full_ranked = ranked(values[_key(workload.full.index, False)], maximize)
    rows = []
    for rung, scaled in sizes[:-1]:
        # the full size's row compares its second measurement with the first: the ceiling noise allows
        row = values[_key(rung.index + (rung.index == workload.full.index), scaled)]
        rows.append({"fraction": rung.fraction, "records": rung.records, "scaled": scaled,
                     "key": _key(rung.index, scaled),
                     "rho": spearmanr(ranked(row, maximize), full_ranked).statistic,
                     "best_third_kept": survivors(ranked(row, maximize), full_ranked, maximize),
                     "failed": sum(v is None for v in row)})
    return {"system": args.system, "workload": workload.name, "records": workload.records, "driver": driver,
            "configs": len(configs), "seed": args.seed, "wall_s": round(time.monotonic() - started, 1),
            "climbed_from": args.climbed_from, "sizes": rows, "values": values,
            "config_list": [catalog.changed(c) for c in configs]}


def _key(index: int, scaled: bool) -> str:
    """A measured size's key in the result: the rung's index, ``s`` appended when it ran scaled."""
    return f"{index}{'s' if scaled else ''}"


def rho_of_those_that_ran(small: list[float | None], full: list[float | None]) -> tuple[float, int]:
    """Spearman's rho over the configs measured at both sizes (failures left out), and how many those were."""
    pairs = [(a, b) for a, b in zip(small, full) if a is not None and b is not None]
    return (spearmanr(*zip(*pairs)).statistic if len(pairs) > 2 else float("nan")), len(pairs)


def table(result: dict) -> str:
    source = f"climbed in {', '.join(result['climbed_from'])}" if result.get("climbed_from") else "drawn at random"
    lines = [f"{result['workload']} ({result['records']:,} records at full size, {result['configs']} configs "
             f"{source}, seed {result['seed']}, {result['wall_s']:.0f} s)", "",
             "| size | records | Spearman rho to full size (failures last) | rho among configs that ran at both (n) "
             "| full size's best third kept | failed |",
             "|---|---|---|---|---|---|"]
    values = result["values"]
    fulls = [s for s in result["sizes"] if s["fraction"] == 1]
    full_key = _key(len(result["sizes"]) - 1, False) if "key" not in fulls[0] else fulls[0]["key"]
    for i, s in enumerate(result["sizes"]):
        key = s.get("key", str(i))
        again = s["fraction"] == 1
        label = "1 (measured again)" if again else f"{s['fraction']:g}{' scaled' if s.get('scaled') else ''}"
        small = values[str(int(key) + 1) if again else key]
        rho, n = rho_of_those_that_ran(small, values[full_key])
        lines.append(f"| {label} | {s['records']:,} | {s['rho']:+.2f} | {rho:+.2f} ({n}) "
                     f"| {s['best_third_kept'] * 100:.0f}% | {s['failed']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", default="rocksdb")
    parser.add_argument("--workload", default="put-get-delete")
    parser.add_argument("--driver")
    parser.add_argument("--records", type=int, help="the workload's full size (default: its own)")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.33, 0.5, 1.0])
    parser.add_argument("--configs", type=int, default=24, help="configs measured, the default among them")
    parser.add_argument("--climbed-from", nargs="+", metavar="STORAGE",
                        help="take the configs from the complete trials of the studies in these storage URLs")
    parser.add_argument("--scaling", choices=("scaled", "unscaled", "both"), default="scaled",
                        help="run the small sizes as a study does (scaled), as the config is, or both")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, help="scratch and logs (default: a new temporary folder)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--table", type=Path, metavar="RESULT", help="print a result file's Markdown table")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return
    if 1.0 not in args.fractions:
        parser.error("--fractions must include 1 (the full size)")
    result = run(args)
    emit(result, args.out)
    print(table(result))


if __name__ == "__main__":
    main()
