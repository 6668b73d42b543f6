"""The OpenShift flavour of the lab's control plane: OpenShift's API definitions on a Kubernetes API server.

The SecurityContextConstraints CRD comes from OpenShift's own API module (github.com/openshift/api),
so gpuready's SCC is admitted or refused against OpenShift's real schema. What the lab does not have
is OpenShift's SCC admission plugin (it runs in openshift-apiserver, not in kube-apiserver): SCCs are
stored and validated, but pods are not checked against them.
"""

from __future__ import annotations

from pathlib import Path

from gpuready.lab.gobuild import module_file

OPENSHIFT_API = "github.com/openshift/api"
#: A commit of openshift/api's default branch (the module has no semantic version tags).
OPENSHIFT_API_VERSION = "v0.0.0-20260709102940-580f1c1ba691"
SCC_CRD = "security/v1/zz_generated.crd-manifests/0000_03_config-operator_01_securitycontextconstraints.crd.yaml"


def scc_crd() -> Path:
    return module_file(OPENSHIFT_API, OPENSHIFT_API_VERSION, SCC_CRD)
