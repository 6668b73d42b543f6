"""Clients of the platforms gpuready provisions and validates: the Kubernetes API (kube, with the RBAC a user
grants gpuready in kube_rbac.yaml) and vCenter (vsphere, and the passthrough plan both the roles and the
read-back derive from it, vsphere_plan)."""
