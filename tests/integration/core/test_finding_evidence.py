"""A role's finding whose evidence is a mapping (the node marks' ``{...} | tojson`` in a YAML template is read
back as one) reaches the reports as YAML's ``key: value`` lines, never as Python prints a dict."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpuready.core.results import Check
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


def _only_finding(tmp_path: Path, task: dict) -> Check:
    """``task`` played in check mode on one local host by the runner; the one finding it reported."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [task]}], sort_keys=False))
    inventory = tmp_path / "inventory"
    inventory.mkdir()
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump({"all": {"hosts": {"node-1": {"ansible_connection": "local"}}}})
    )
    # run_playbook joins the playbook onto the collection's folder; an absolute path stands for itself.
    run = run_playbook(str(playbook), inventory, tmp_path / "runs", check=True)
    [check] = run.hosts["node-1"].checks
    return check


def test_a_mapping_evidence_is_yaml_text_not_a_python_repr(tmp_path: Path) -> None:
    (tmp_path / "findings.yml.j2").write_text(FINDINGS)
    task = {
        "name": "Report a finding with a mapping as evidence",
        "gpuready.gpu.findings": {
            "findings": "{{ lookup('ansible.builtin.template', 'findings.yml.j2') | from_yaml }}"
        },
    }
    check = _only_finding(tmp_path, task)
    # Jinja's tojson sorts the keys.
    assert check.evidence == "changed: false\ncheck_mode: true\nfailed_checks: []\nresult: passed"


def test_the_roles_cite_the_manual_where_it_is_installed(tmp_path: Path) -> None:
    """The runner hands the roles the manual's folder (a wheel has no docs/ beside the user): the roles' messages
    that cite a page (the Secure Boot ones) name it there."""
    from gpuready.core import docs

    task = {
        "name": "Report a finding citing a page",
        "gpuready.gpu.findings": {
            "findings": [
                {
                    "id": "preflight.secure_boot",
                    "status": "passed",
                    "message": "{{ (gpuready_docs_dir | default('docs')) ~ '/provisioning-nvidia.md' }}",
                }
            ]
        },
    }
    check = _only_finding(tmp_path, task)
    assert check.message == docs.page("provisioning-nvidia.md")
    assert Path(check.message).is_file()
