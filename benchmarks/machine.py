"""The machine a benchmark runs on: CPU model, usable cores, CPU time of processes, load.

Everything here reads /proc (Linux); elsewhere the functions degrade to what
`platform` and `os` report, or to None.
"""

from __future__ import annotations

import os
import platform
import resource
import time
from dataclasses import dataclass

# CPU flags worth naming in a report: the x86 kernel sets convt and the FMA loops use.
REPORTED_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "f16c")


def usable_cores() -> int:
    """Number of cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpuinfo_fields() -> dict[str, str]:
    """The first processor's `key: value` lines of /proc/cpuinfo ({} if unreadable)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if not line.strip():
                    break  # end of the first processor's block
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def cpu_description() -> dict:
    """Model name, vendor, family, model, stepping and the relevant flags of this CPU.

    >>> sorted(cpu_description())[:3]
    ['family', 'flags', 'logical_cpus']
    """
    fields = cpuinfo_fields()
    flags = set(fields.get("flags", "").split())
    return {
        "model_name": fields.get("model name") or platform.processor() or platform.machine(),
        "vendor": fields.get("vendor_id"),
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "stepping": fields.get("stepping"),
        "flags": [flag for flag in REPORTED_FLAGS if flag in flags],
        "logical_cpus": os.cpu_count(),
        "usable_cores": usable_cores(),
        "platform": platform.platform(),
    }


def cpu_line(cpu: dict) -> str:
    """'AMD EPYC (AuthenticAMD family 25 model 17 stepping 1; avx2 fma avx512f), 2 logical CPUs'."""
    identity = " ".join(
        f"{label} {cpu[key]}"
        for label, key in (("family", "family"), ("model", "model"), ("stepping", "stepping"))
        if cpu.get(key) is not None
    )
    details = "; ".join(
        filter(None, [" ".join(filter(None, [cpu.get("vendor"), identity])), " ".join(cpu["flags"])])
    )
    return (
        f"{cpu['model_name']} ({details or 'no /proc/cpuinfo'}), {cpu['logical_cpus']} logical CPUs, "
        f"{cpu['usable_cores']} usable"
    )


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds used so far by every thread of process `pid`, None if unknown.

    Reads the nanosecond counters of /proc/<pid>/task/*/schedstat (threads
    that already exited are lost, which only makes the count smaller), else
    the 10 ms ticks of /proc/<pid>/stat.
    """
    try:
        total_ns = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as schedstat:
                    total_ns += int(schedstat.read().split()[0])
            except (OSError, IndexError, ValueError):
                continue  # the thread exited meanwhile
        return total_ns / 1e9
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


IDLE_SLICE_SECONDS = 0.005
IDLE_BUSY_FRACTION = 0.1
IDLE_TIMEOUT_SECONDS = 1.0
IDLE_FALLBACK_SECONDS = 0.05


def wait_until_idle(pids: list[int]) -> float:
    """Sleep until the processes `pids` together use almost no CPU; return the seconds waited.

    Thread pools keep spinning after a call (onnxruntime about 40 ms,
    OpenBLAS about 100 ms, OpenMP runtimes a few ms) and would take the cores
    of the next engine. Returns after a slice of IDLE_SLICE_SECONDS in which
    they used less than IDLE_BUSY_FRACTION of one core, or after
    IDLE_TIMEOUT_SECONDS. Without /proc, sleeps IDLE_FALLBACK_SECONDS.
    """
    start = time.perf_counter()
    deadline = start + IDLE_TIMEOUT_SECONDS
    before = cpu_seconds_of(pids)
    if before is None:
        time.sleep(IDLE_FALLBACK_SECONDS)
        return time.perf_counter() - start
    while time.perf_counter() < deadline:
        time.sleep(IDLE_SLICE_SECONDS)
        after = cpu_seconds_of(pids)
        if after is None or after - before < IDLE_BUSY_FRACTION * IDLE_SLICE_SECONDS:
            break
        before = after
    return time.perf_counter() - start


def cpu_seconds_of(pids: list[int]) -> float | None:
    """Total CPU seconds of the processes `pids` (those that exited count 0); None without /proc."""
    if not os.path.isdir("/proc/self/task"):
        return None
    return sum(process_cpu_seconds(pid) or 0.0 for pid in pids)


@dataclass
class LoadSnapshot:
    """Wall clock, busy CPU seconds of the whole machine, and CPU seconds of this
    process plus its reaped children."""

    wall: float
    machine_busy: float
    ours: float


def load_snapshot() -> LoadSnapshot | None:
    """A LoadSnapshot now, None without /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    ours = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return LoadSnapshot(time.perf_counter(), busy, ours)


def other_processes_load(start: LoadSnapshot | None, end: LoadSnapshot | None) -> float | None:
    """Fraction of the machine's CPUs used by other processes (or stolen by the
    hypervisor) between two snapshots: the noise a run competed with.

    Our worker processes count as ours only once they have exited and been
    reaped, so take `end` after stopping them.
    """
    if start is None or end is None or end.wall <= start.wall:
        return None
    busy = end.machine_busy - start.machine_busy
    ours = end.ours - start.ours
    return max(0.0, (busy - ours) / ((end.wall - start.wall) * (os.cpu_count() or 1)))


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15 minute load averages, None where the OS has none."""
    try:
        return os.getloadavg()
    except OSError:
        return None
