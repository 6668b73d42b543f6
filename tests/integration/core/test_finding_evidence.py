"""A role's finding whose evidence is a mapping (the node marks' ``{...} | tojson`` in a YAML template is read
back as one) reaches the reports as YAML's ``key: value`` lines, never as Python prints a dict."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuready.core.runner import run_playbook

pytestmark = pytest.mark.slow

# The shape of playbooks/roles/node_validation_marks/templates/findings.yml.j2: a mapping rendered with tojson
# inside a YAML document, which from_yaml reads back as a mapping, then handed to the findings action.
FINDINGS = """\
- id: kubernetes.node_marks
  status: passed
  message: labelled gpuready.io/validated=2026-11-28 (unchanged)
  evidence: {{ ({'result': 'passed', 'failed_checks': [], 'changed': false,
                 'check_mode': ansible_check_mode}) | tojson }}
"""


def test_a_mapping_evidence_is_yaml_text_not_a_python_repr(tmp_path: Path) -> None:
    (tmp_path / "findings.yml.j2").write_text(FINDINGS)
    playbook = tmp_path / "play.yml"
    tasks = [
        {
            "name": "Report a finding with a mapping as evidence",
            "gpuready.gpu.findings": {
                "findings": "{{ lookup('ansible.builtin.template', 'findings.yml.j2') | from_yaml }}"
            },
        }
    ]
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}], sort_keys=False))
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump({"all": {"hosts": {"node-1": {"ansible_connection": "local"}}}})
    )
    # run_playbook joins the playbook onto the collection's folder; an absolute path stands for itself.
    run = run_playbook(str(playbook), inventory, tmp_path / "runs", check=True)
    [check] = run.hosts["node-1"].checks
    # Jinja's tojson sorts the keys.
    assert check.evidence == "changed: false\ncheck_mode: true\nfailed_checks: []\nresult: passed"
