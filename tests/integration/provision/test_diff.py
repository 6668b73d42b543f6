"""``provision cluster --diff``: Ansible's before/after of a real play that changes files, read from the run's events
and printed per task with the hosts that got the same change grouped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, gpuready
from tests.doc_samples import owned_block
from tests.playbooks import site
from tests.unit.core.test_bad_inputs import make_inventory

LOCAL = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
SECRET = "s3cr3t-vault-value"


def _site(tmp_path: Path, files: Path) -> Path:
    play = {
        "name": "Config | Write each node's settings",
        "hosts": "gpu_nodes",
        "gather_facts": False,
        "tasks": [
            {
                "name": "Config | Write app.conf",
                "ansible.builtin.copy": {
                    "dest": f"{files}/{{{{ inventory_hostname }}}}/app.conf",
                    "content": "threads = 8\nnode = {{ inventory_hostname }}\n",
                    "mode": "0600",
                },
            },
            {
                "name": "Config | Leave a file as it is",
                "ansible.builtin.file": {"path": str(files), "state": "directory"},
            },
        ],
    }
    return site(tmp_path, play)


def _setup(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    files = tmp_path / "files"
    hosts = ["node-a", "node-b", "node-c"]
    for host in hosts:
        (files / host).mkdir(parents=True)
        threads = 2 if host != "node-c" else 4
        (files / host / "app.conf").write_text(f"threads = {threads}\nnode = {host}\n")
    inv = make_inventory(tmp_path, hosts={"gpu_nodes": {"hosts": dict.fromkeys(hosts, LOCAL)}})
    return files, inv, {"GPUREADY_PLAYBOOKS": str(_site(tmp_path, files))}


def test_diff_prints_each_change_once_per_group_of_hosts_and_changes_nothing_in_check_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files, inv, env = _setup(tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # The docs' --diff sample is this run: the same command in the folder of the inventory, an excerpt of it.
    sample = owned_block(ROOT / "docs" / "provisioning.md")
    assert sample.commands == [f"gpuready provision cluster -i {inv.name} --check --diff"]
    [done] = sample.run(tmp_path)
    assert done.returncode == 0, done.stdout
    out = done.stdout
    assert "diff: 3 change(s) in 1 task(s) would change (check mode)" in out
    assert "── Config | Write app.conf: 3 host(s) (2 different diffs)" in out
    # node-a and node-b had the same file (their own name aside): one diff for both, the larger group first
    first, second = out.index("2 host(s): node-a, node-b"), out.index("1 host(s): node-c")
    assert first < second
    assert out.count("-threads = 2") == 1 and out.count("-threads = 4") == 1 and out.count("+threads = 8") == 2
    assert f"--- before: {files}/<host>/app.conf" in out
    assert "Leave a folder as it is" not in out  # no change, no diff
    # check mode: nothing changed on the hosts
    assert (files / "node-a" / "app.conf").read_text() == "threads = 2\nnode = node-a\n"
    [diffs] = (tmp_path / "gpuready-runs").glob("*/diffs.txt")
    assert "+threads = 8" in diffs.read_text() and f"every diff: {diffs.relative_to(tmp_path)}" in out
    sample.assert_printed([done], excerpt=True)
    # without --diff, none of it
    runs = tmp_path / "runs"
    plain = gpuready("provision", "cluster", "-i", str(inv), "--artifacts", str(runs), "--check", env=env)
    assert plain.returncode == 0 and "threads" not in plain.stdout and "diff:" not in plain.stdout


def test_a_diff_at_apply_shows_what_was_changed_with_secrets_masked(tmp_path: Path) -> None:
    files, inv, env = _setup(tmp_path)
    (files / "node-a" / "app.conf").write_text(f"threads = 2\nnode = node-a\npassword = {SECRET}\n")
    (files / "node-c" / "app.conf").write_text("threads = 4\x1b[2J\nnode = node-c\n")  # ESC: clear the screen
    runs = tmp_path / "runs"
    done = gpuready(
        "provision", "cluster", "-i", str(inv), "--artifacts", str(runs), "--diff",
        env={**env, "GPUREADY_VCENTER_PASSWORD": SECRET},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "diff: 3 change(s) in 1 task(s) changed" in done.stdout
    assert "-password = ********" in done.stdout and SECRET not in done.stdout
    assert "-threads = 4\\x1b[2J" in done.stdout and "\x1b" not in done.stdout  # shown, not obeyed
    assert (files / "node-a" / "app.conf").read_text() == "threads = 8\nnode = node-a\n"
    for path in runs.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    again = gpuready("provision", "cluster", "-i", str(inv), "--artifacts", str(runs), "--diff", env=env)
    assert again.returncode == 0 and "diff: no task that changed anything reported a diff" in again.stdout


def test_a_task_that_changed_without_a_diff_is_named(tmp_path: Path) -> None:
    _, inv, env = _setup(tmp_path)
    site = Path(env["GPUREADY_PLAYBOOKS"]) / "site.yml"
    plays = yaml.safe_load(site.read_text())
    # ansible.builtin.command reports every run as a change and returns no diff
    plays[0]["tasks"].append({"name": "Config | Run a command", "ansible.builtin.command": {"argv": ["true"]}})
    site.write_text(yaml.safe_dump(plays, sort_keys=False))
    runs = tmp_path / "runs"
    done = gpuready("provision", "cluster", "-i", str(inv), "--artifacts", str(runs), "--diff", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "diff: 3 change(s) in 1 task(s) changed" in done.stdout
    line = "── Config | Run a command: 3 host(s), no diff from its module"
    assert line in done.stdout
    [diffs] = runs.glob("*/diffs.txt")
    assert line in diffs.read_text()
    # with no diff at all, the task is still named
    again = gpuready("provision", "cluster", "-i", str(inv), "--artifacts", str(runs), "--diff", env=env)
    assert again.returncode == 0 and "diff: no task that changed anything reported a diff" in again.stdout
    assert line in again.stdout
