"""Each role's findings add to the gpuready_checks fact, as Ansible runs the roles for gpuready.

gpuready runs Ansible with facts only under ansible_facts (inject_facts_as_vars off): the findings
action must find the earlier findings there, or every role's report would replace the previous ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.provision.local_play import run_local_play


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
                {
                    "name": "Save",
                    "ansible.builtin.copy": {
                        "content": "{{ ansible_facts['gpuready_checks'] | to_json }}",
                        "dest": str(tmp_path / "out.json"),
                        "mode": "0644",
                    },
                },
            ],
        }
    ]
    done = run_local_play(tmp_path, play)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [f["id"] for f in json.loads((tmp_path / "out.json").read_text())] == ["first.check", "second.check"]
