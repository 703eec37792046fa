"""Reading a noeira run's metrics.jsonl in the benchmarks' report scripts."""
import json


def step_records(run_dir):
    return [r for r in map(json.loads, open(f"{run_dir}/metrics.jsonl")) if r["type"] == "step"]


def step_times(run_dir, warmup):
    """Seconds of each step after the first `warmup` (from the records' elapsed_s; --log-every
    1), and the steps' losses."""
    records = step_records(run_dir)
    elapsed = {r["step"]: r["elapsed_s"] for r in records}
    elapsed.setdefault(0, 0.0)
    times = [elapsed[s] - elapsed[s - 1] for s in range(warmup + 1, max(elapsed) + 1)]
    return times, [r["loss"] for r in records]


def sgemm_rate(path):
    """The best GFLOP/s of bench_sgemm's 1024^3 repetitions in a --benchmark_format=json file."""
    return max(b["gflops"] for b in json.load(open(path))["benchmarks"]
               if b["name"] == "BM_Sgemm1024/real_time" and b.get("run_type") == "iteration")
