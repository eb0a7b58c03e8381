"""Chapter 04's phase diagram as probabilities: every cell of the (width d, first step eta0) grid run at several
data seeds x several initialisation seeds, each (data seed, initialisation seed) one Dask task that runs the whole
grid (``tokensel.experiments.phase.phase_runs``). Chapter 04 shows the result and compares it with a smaller grid it
executes itself at its own seeds (the two samples are independent draws; the chapter's claims allow binomial noise).

    python scripts/phase_probability.py                       # 3 data seeds x 20 initialisations, LocalCluster
    python scripts/phase_probability.py --scheduler tcp://...  # an existing Dask cluster

Results: ``book/recorded/phase/parts/data-<D>-init-<I>.csv`` (one per task; a stopped sweep resumes and skips
the finished ones), ``book/recorded/phase/runs.csv`` (all rows) and ``provenance.json`` (command, commit,
versions, seeds, workers, wall time). Seeds: data seeds 5000, 5001, 5002 and initialisation seeds 6000 to 6019,
disjoint from every seed the book draws (``seed + k`` with ``0 <= k < 100`` from ``seed = 0``) and from the recorded
replication's (1000, 1100, ..., each ``+ k``; a replication of 40 seeds or more would reach 5000).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "recorded" / "phase"
DATA_SEEDS = (5000, 5001, 5002)
INIT_SEEDS = tuple(range(6000, 6020))


def run_one(
    data_seed: int,
    init_seed: int,
    out: str,
    follow_evaluations: int | None = None,
    implicit_evaluations: int | None = None,
    digits: int | None = None,
) -> str:
    """One task: the whole grid at one (data seed, initialisation seed), written to its part file; a run followed
    in many digits also writes its follow-on, ``followed/data-<D>-init-<I>-d-<d>-eta0-<eta0>.csv`` (t and p)."""
    os.environ.setdefault("TOKENSEL_PROGRESS", "0")
    import torch

    torch.set_num_threads(1)
    from tokensel.experiments import phase

    runs = phase.phase_runs(
        [data_seed],
        [init_seed],
        progress=False,
        follow_evaluations=follow_evaluations,
        implicit_evaluations=implicit_evaluations,
        digits=digits,
    )
    for key, path_tp in runs.attrs.get("followed", {}).items():
        phase.write_followed(Path(out), key, path_tp)
    path = Path(out) / "parts" / f"data-{data_seed}-init-{init_seed}.csv"
    tmp = path.with_suffix(".tmp")
    runs.to_csv(tmp, index=False, float_format="%.17g")
    tmp.replace(path)
    return path.name


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-seeds", type=int, nargs="+", default=list(DATA_SEEDS))
    ap.add_argument("--init-seeds", type=int, nargs="+", default=list(INIT_SEEDS))
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="LocalCluster workers (default: cores)")
    ap.add_argument("--scheduler", default=None, help="the address of an existing Dask cluster")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument(
        "--follow-evaluations",
        type=int,
        default=None,
        help="gradient evaluations after which a trapped run's follow-on goes on by implicit steps (a stiff flow "
        "never ends without; default: no limit, as 59 of the recorded sweep's 60 parts ran)",
    )
    ap.add_argument(
        "--implicit-evaluations",
        type=int,
        default=None,
        help="gradient evaluations (the Hessians' included) after which those implicit steps stop too, and the run "
        "is recorded as stiff, its own max-margin direction not compared (default: no limit)",
    )
    ap.add_argument(
        "--digits",
        type=int,
        default=None,
        help="with --implicit-evaluations: a run whose float64 implicit steps spent their budget is followed again "
        "by implicit steps in this many digits (mpmath), and its follow-on is written to followed/ (default: none)",
    )
    args = ap.parse_args(argv)
    import pandas as pd
    from dask.distributed import Client, LocalCluster, as_completed

    from tokensel.training.progress import bar
    from tokensel_book.replication import software
    from tokensel_book.status import commit as git_commit

    (args.out / "parts").mkdir(parents=True, exist_ok=True)
    tasks = [(d, i) for d in args.data_seeds for i in args.init_seeds]
    todo = [(d, i) for d, i in tasks if not (args.out / "parts" / f"data-{d}-init-{i}.csv").is_file()]
    print(
        f"phase: {len(tasks)} tasks ({len(args.data_seeds)} data seeds x {len(args.init_seeds)} initialisations), "
        f"{len(tasks) - len(todo)} already done in {args.out}, {len(todo)} to run"
    )
    start = time.time()
    commit = git_commit(ROOT)  # the code the tasks run, taken when they start
    if todo:
        if args.scheduler:
            client, cluster = Client(args.scheduler), None
        else:
            cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
        try:
            futures = [
                client.submit(
                    run_one,
                    d,
                    i,
                    str(args.out),
                    args.follow_evaluations,
                    args.implicit_evaluations,
                    args.digits,
                    pure=False,
                )
                for d, i in todo
            ]
            with bar(len(futures), "phase tasks") as pbar:
                for k, fut in enumerate(as_completed(futures), 1):
                    name = fut.result()
                    pbar.update()
                    print(f"phase: {name} done ({k}/{len(futures)}, {time.time() - start:.0f} s)", flush=True)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    # every finished part, also those of earlier sweeps over other seeds
    parts = [pd.read_csv(path) for path in sorted((args.out / "parts").glob("data-*-init-*.csv"))]
    runs = pd.concat(parts, ignore_index=True).sort_values(["data_seed", "d", "eta0", "init_seed"])
    runs.to_csv(args.out / "runs.csv", index=False, float_format="%.17g")
    prov_path = args.out / "provenance.json"
    prov = json.loads(prov_path.read_text()) if prov_path.is_file() else {"sweeps": []}
    prov["sweeps"].append(
        {
            "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
            "commit": commit,
            "versions": software(),
            "data_seeds": args.data_seeds,
            "init_seeds": args.init_seeds,
            "ran": len(todo),
            "follow_evaluations": args.follow_evaluations,
            "implicit_evaluations": args.implicit_evaluations,
            "digits": args.digits,
            "workers": args.workers,
            "scheduler": args.scheduler,
            "wall_seconds": round(time.time() - start, 1),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    )
    prov_path.write_text(json.dumps(prov, indent=1) + "\n")
    print(f"phase: {len(runs)} runs in {args.out / 'runs.csv'} ({time.time() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
