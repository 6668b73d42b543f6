"""Each role's findings add to the gpuready_checks fact, as Ansible runs the roles for gpuready.

gpuready runs Ansible with facts only under ansible_facts (inject_facts_as_vars off): the findings
action must find the earlier findings there, or every role's report would replace the previous ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.provision.local_play import run_and_read, run_local_play, save


def _finding(check_id: str) -> dict[str, str]:
    return {"id": check_id, "status": "passed", "message": check_id, "evidence": "", "remedy": ""}


def test_the_findings_of_every_role_are_kept(tmp_path: Path) -> None:
    play = [
        {
            "name": "Two roles report",
            "hosts": "all",
            "gather_facts": False,
            "tasks": [
                {"name": "First", "gpuready.gpu.findings": {"findings": [_finding("first.check")]}},
                {"name": "Second", "gpuready.gpu.findings": {"findings": [_finding("second.check")]}},
                save("ansible_facts['gpuready_checks']", tmp_path),
            ],
        }
    ]
    assert [f["id"] for f in run_and_read(tmp_path, play)] == ["first.check", "second.check"]


def test_findings_are_cached_as_plain_data(tmp_path: Path) -> None:
    """Findings come from templates (a role's findings.yml.j2, through from_yaml), so Ansible tags every value
    with its origin; cached with those tags, every later task of the run decodes them again at a high cost.
    ansible-runner gives each run a jsonfile fact cache, as here, so what is cached can be read back."""
    template = json.dumps([_finding("templated.check") | {"message": "{{ 40 + 2 }} GPUs"}])
    play = [
        {
            "name": "A role reports what its template found",
            "hosts": "all",
            "gather_facts": False,
            "vars": {"template_output": template},
            "tasks": [
                {"name": "Work out", "ansible.builtin.set_fact": {"found": "{{ template_output | from_yaml }}"}},
                {"name": "Report", "gpuready.gpu.findings": {"findings": "{{ found }}"}},
            ],
        }
    ]
    cache = tmp_path / "fact_cache"
    env = {"ANSIBLE_CACHE_PLUGIN": "jsonfile", "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(cache)}
    done = run_local_play(tmp_path, play, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    [cached] = cache.iterdir()
    facts = json.loads(json.loads(cached.read_text())["__payload__"])
    assert facts["gpuready_checks"] == [_finding("templated.check") | {"message": "42 GPUs"}]
