# -*- coding: utf-8 -*-
# Shared by gpuready's vSphere modules: the connection options and the way into
# gpuready.core.platforms.vsphere, the project's one pyvmomi connection helper.
# The modules run on the controller (connection local) with the Python gpuready is installed in.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import traceback

try:
    from gpuready.core.errors import GpureadyError
    from gpuready.core.platforms.vsphere import Target, connect
    HAS_GPUREADY = True
    IMPORT_ERROR = None
except ImportError:
    HAS_GPUREADY = False
    IMPORT_ERROR = traceback.format_exc()

CONNECTION_SPEC = dict(
    hostname=dict(type="str", required=True),
    port=dict(type="int", default=443),
    username=dict(type="str", required=True),
    password=dict(type="str", no_log=True, default=None),
    password_env=dict(type="str", default="GPUREADY_VCENTER_PASSWORD"),
    validate_certs=dict(type="bool", default=True),
    ca_file=dict(type="str", default=""),
    task_timeout=dict(type="int", default=600),
)


def require_gpuready(module):
    if not HAS_GPUREADY:
        module.fail_json(msg="gpuready is not importable by this Python; run the play through `gpuready provision` "
                             "or set ansible_python_interpreter to gpuready's Python", exception=IMPORT_ERROR)


def target(module):
    """The connection target; the password from the module option or the named environment variable."""
    params = module.params
    password = params["password"] or os.environ.get(params["password_env"], "")
    if not password:
        module.fail_json(msg="the vCenter password is not set: export %s=... or set vcenter_password in Ansible Vault"
                         % params["password_env"])
    module.no_log_values.add(password)
    return Target(host=params["hostname"], port=params["port"], user=params["username"], password=password,
                  verify_tls=params["validate_certs"], ca_file=params["ca_file"] or "")


def session(module):
    """A context manager: a logged-in ServiceInstance."""
    return connect(target(module))


def fail(module, error):
    """One line for our errors; a traceback only for the unexpected."""
    # "error" survives a task's failed_when, so a role can still tell failures apart.
    if HAS_GPUREADY and isinstance(error, GpureadyError):
        module.fail_json(msg=str(error), error=str(error))
    message = "%s: %s" % (type(error).__name__, error)
    module.fail_json(msg=message, error=message, exception=traceback.format_exc())
