"""The TWINS dissertation's experiments on harmonia-fwdsim (`harmonia reproduce forwarding`):
access patterns x operations x request sizes with every baseline scheduler, TWINS and no
forwarding, then two applications at once. Results against the claims in docs/reproduction.md."""

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harmonia.forwarding.model import App, Disk, Forwarding, normalize, run_one

BASELINES = ("fifo", "to", "to-agg", "hbrr", "sjf", "mlf")
SCHEDULERS = (*BASELINES, "twins", "none")
PATTERNS = ("file-per-process", "shared-contiguous", "shared-strided")
SIZES = (32 << 10, 256 << 10, 1 << 20, 4 << 20)
PER_CLIENT = 8 << 20  # bytes each client moves in a single-application run


def platform(name: str, apps: list[App]) -> Forwarding:
    """32 clients on 4 forwarding nodes, 4 data servers, 128 KiB stripes, the default disk;
    TWINS with its default 1 ms window (untuned)."""
    return Forwarding(
        name=name, servers=4, nodes=4, stripe=128 << 10, schedulers=list(SCHEDULERS),
        options={"to-agg.max_requests": "16"}, disk=Disk(), apps=apps,
    )  # fmt: skip


def single_cases() -> list[tuple[str, str, int, Forwarding]]:
    cases = []
    for pattern in PATTERNS:
        for op in ("read", "write"):
            for size in SIZES:
                app = App(name="A", clients=32, pattern=pattern, op=op, request=size,
                          requests=max(1, PER_CLIENT // size))  # fmt: skip
                cases.append((pattern, op, size, platform(f"{pattern}-{op}-{size}", [app])))
    return cases


def two_apps() -> Forwarding:
    return platform(
        "two-apps",
        [
            App(name="strided-read", clients=16, pattern="shared-strided", op="read",
                request=32 << 10, requests=128),
            App(name="fpp-write", clients=16, pattern="file-per-process", op="write",
                request=1 << 20, requests=4),
        ],
    )  # fmt: skip


def run_grid(jobs: int, progress: Callable[[str], None]) -> dict[str, Any]:
    runs: dict[tuple[str, ...], dict[str, Any]] = {}
    for pattern, op, size, f in single_cases():
        for scheduler in SCHEDULERS:
            runs[(pattern, op, str(size), scheduler)] = normalize(f, scheduler, list(f.apps))
    pair = two_apps()
    for scheduler in SCHEDULERS:
        runs[("two-apps", scheduler, "together")] = normalize(pair, scheduler, list(pair.apps))
        for app in pair.apps:
            runs[("two-apps", scheduler, app.name)] = normalize(
                pair, scheduler, list(pair.apps), alone=app.name
            )
    results: dict[tuple[str, ...], dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {key: pool.submit(run_one, config) for key, config in runs.items()}
        for number, (key, future) in enumerate(futures.items(), start=1):
            results[key] = future.result()
            progress(f"[{number}/{len(futures)}] {' '.join(key)}")
    single = []
    for pattern, op, size, _ in single_cases():
        bw = {s: results[(pattern, op, str(size), s)]["apps"][0]["bandwidth"] for s in SCHEDULERS}
        best = max(BASELINES, key=lambda s: bw[s])
        single.append({
            "pattern": pattern, "op": op, "request": size, "bandwidth": bw,
            "best_baseline": best,
            "twins_vs_best_baseline": bw["twins"] / bw[best] - 1,
            "twins_vs_none": bw["twins"] / bw["none"] - 1,
            "mean_dispatch_bytes": {s: results[(pattern, op, str(size), s)]["mean_dispatch_bytes"]
                                    for s in SCHEDULERS},
        })  # fmt: skip
    pair_rows = []
    for scheduler in SCHEDULERS:
        together = results[("two-apps", scheduler, "together")]
        row: dict[str, Any] = {"scheduler": scheduler, "makespan": together["makespan"], "apps": {}}
        for app in together["apps"]:
            alone = results[("two-apps", scheduler, app["name"])]["apps"][0]
            row["apps"][app["name"]] = {
                "bandwidth": app["bandwidth"],
                "interference": app["time"] / alone["time"],
            }
        pair_rows.append(row)
    return {"single": single, "two_apps": pair_rows}


def markdown(report: dict[str, Any]) -> str:
    def mb(x: float) -> str:
        return f"{x / 1e6:.0f}"

    lines = [
        "Bandwidth (MB/s) of one application, 32 clients, 4 forwarding nodes, 4 data servers:",
        "",
        "| pattern | op | request | "
        + " | ".join(SCHEDULERS)
        + " | TWINS vs best baseline | TWINS vs none |",
        "| --- | --- | ---: | " + " | ".join("---:" for _ in SCHEDULERS) + " | ---: | ---: |",
    ]
    for r in report["single"]:
        size = r["request"]
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        lines.append(
            f"| {r['pattern']} | {r['op']} | {label} | "
            + " | ".join(mb(r["bandwidth"][s]) for s in SCHEDULERS)
            + f" | {r['twins_vs_best_baseline']:+.0%} ({r['best_baseline']}) |"
            f" {r['twins_vs_none']:+.0%} |"
        )
    lines += [
        "",
        "Two applications at once (strided 32 KiB reads, file-per-process 1 MiB writes): "
        "bandwidth (MB/s) and interference (time together / time alone):",
        "",
        "| scheduler | strided-read MB/s | I_f | fpp-write MB/s | I_f | makespan (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in report["two_apps"]:
        a, b = row["apps"]["strided-read"], row["apps"]["fpp-write"]
        lines.append(
            f"| {row['scheduler']} | {mb(a['bandwidth'])} | {a['interference']:.2f} | "
            f"{mb(b['bandwidth'])} | {b['interference']:.2f} | {row['makespan']:.3f} |"
        )
    return "\n".join(lines) + "\n"
