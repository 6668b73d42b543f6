"""How the lab records and stops the processes it starts (real child processes, no lab component)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

# On SIGTERM the child appends its name to a file and exits; until then it sleeps.
CHILD = """
import signal, sys, time
def bye(*_):
    with open(sys.argv[1], "a") as f:
        f.write(sys.argv[2] + "\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
open(sys.argv[1] + "." + sys.argv[2], "w").close()
while True:
    time.sleep(0.05)
"""


def _spawn_children(lab, tmp_path: Path, names: list[str]) -> list[int]:  # type: ignore[no-untyped-def]
    order = tmp_path / "order"
    pids = [lab.spawn(n, [sys.executable, "-c", CHILD, str(order), n], component="part") for n in names]
    deadline = time.monotonic() + 30
    while not all(Path(f"{order}.{n}").exists() for n in names):  # each has its handler installed
        assert time.monotonic() < deadline, "children did not start"
        time.sleep(0.05)
    return pids


def test_stop_in_reverse_stops_the_last_started_first(tmp_path: Path) -> None:
    from gpuready.lab import Lab, pid_alive, stop_in_reverse

    lab = Lab(tmp_path / "lab")
    pids = _spawn_children(lab, tmp_path, ["etcd", "apiserver", "scheduler"])
    stop_in_reverse(pids)
    assert (tmp_path / "order").read_text().split() == ["scheduler", "apiserver", "etcd"]
    assert not any(pid_alive(p) for p in pids)


def test_spawned_processes_are_recorded_at_once_and_a_reused_pid_is_not_ours(tmp_path: Path) -> None:
    from gpuready.lab import Lab, stop_in_reverse

    lab = Lab(tmp_path / "lab")
    pids = _spawn_children(lab, tmp_path, ["one", "two"])
    try:
        assert lab.recorded("part") == pids
        record = tmp_path / "lab" / "part" / "pids"
        first, second = record.read_text().splitlines()
        # The first pid now "belongs to another process": same number, another start time.
        record.write_text(f"{first.split()[0]} 1\n{second}\n")
        assert lab.recorded("part") == pids[1:]
    finally:
        stop_in_reverse(pids)
    assert lab.recorded("part") == []


# Ctrl-C lands after the child started and before it is recorded (where Popen waits for the exec, too).
INTERRUPTED_START = """
import json, os, signal, sys
import gpuready.lab as lab_module
from gpuready.core import cancel

real_start_time = lab_module.start_time
def start_time_then_ctrl_c(pid):
    os.kill(os.getpid(), signal.SIGINT)
    return real_start_time(pid)
lab_module.start_time = start_time_then_ctrl_c

lab = lab_module.Lab(sys.argv[1])
outcome = "returned"
with cancel.handling_signals():
    try:
        lab.spawn("kube-scheduler", [sys.executable, "-c", "import time; time.sleep(60)"], component="kubernetes")
    except KeyboardInterrupt:
        outcome = "interrupted"
children = cancel.descendants()
for pid in children:
    os.kill(pid, signal.SIGKILL)
print(json.dumps({"outcome": outcome, "children": children, "spawned": lab.spawned.get("kubernetes", []),
                  "recorded": [int(line.split()[0]) for line in
                               (lab.root / "kubernetes" / "pids").read_text().splitlines()]}))
"""


def test_ctrl_c_while_a_child_starts_still_records_it_under_its_component(tmp_path: Path) -> None:
    """The interrupt comes after the start is recorded, so undoing the component's start stops that child."""
    run = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_START, str(tmp_path / "lab")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["outcome"] == "interrupted"
    assert len(seen["children"]) == 1
    assert seen["spawned"] == seen["recorded"] == seen["children"]


def test_a_process_that_exited_is_stopped_even_before_it_is_reaped(tmp_path: Path) -> None:
    # The lab's detached processes are reaped by init, which some inits do only every few seconds: until then
    # an exited process is a zombie, and `lab down` must not wait for it.
    from gpuready.lab import pid_alive, start_time

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while start_time(child.pid):
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.05)
    try:
        assert Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1].startswith("Z")  # exited, not reaped
        assert not pid_alive(child.pid)
    finally:
        child.wait()
    assert not pid_alive(child.pid)


def test_lab_down_names_what_it_stops(tmp_path: Path) -> None:
    from gpuready.lab import Component, Lab, stop_in_reverse

    class Part(Component):
        name = "part"

    lab = Lab(tmp_path / "lab")
    pids = _spawn_children(lab, tmp_path, ["one", "two"])
    try:
        said = Part().stopping(lab, {"pids": pids, "namespaces": ["ns-0", "ns-1", "ns-2"]})
    finally:
        stop_in_reverse(pids)
    assert said == f"2 process(es) ({Path(sys.executable).name} x2) and 3 network namespace(s)"
    assert Part().stopping(lab, {"pids": pids}) == "no running process"
