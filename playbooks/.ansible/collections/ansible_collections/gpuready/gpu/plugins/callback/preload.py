# -*- coding: utf-8 -*-
# Copyright: gpuready contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Import, in ansible-playbook's own process, the connection plugins its forked task workers will use.

Ansible forks a worker process for every task and host, and the worker imports the connection plugin
unless the process it was forked from already did: the plugin loader keeps imported plugins in a
module-level cache, which a fork inherits. ansible-playbook imports its own connection plugins (ssh,
local, ...) and each task's action plugin before forking, but not a connection plugin from a collection
(community.general.chroot, community.docker.docker, ...): every worker imports it again, about 20 ms a
task here for community.general.chroot, most of it resolving the collection's plugin routing. Imported
once here at each play, every later fork starts with it.

Only an optimisation: a plugin that cannot be imported here is left to the worker, which reports the
error as it always would.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Import the inventory's connection plugins once, in ansible-playbook's process
description:
  - At the start of each play, imports the connection plugins that the inventory's groups and hosts name
    (ansible_connection) and the play's connection keyword, so forked task workers inherit them instead of
    importing them again for every task.
  - Changes nothing about what runs or what is reported.
author: gpuready contributors
requirements:
  - enable it in ansible.cfg (callbacks_enabled)
"""

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import connection_loader


def inventory_connections(inventory):
    """The plain (untemplated) ansible_connection values of the inventory's groups and hosts."""
    names = set()
    if inventory is None:
        return names
    for holder in list(inventory.groups.values()) + list(inventory.hosts.values()):
        value = holder.get_vars().get("ansible_connection")
        if isinstance(value, str) and value and "{" not in value:
            names.add(value)
    return names


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpuready.gpu.preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._imported = set()

    def v2_playbook_on_play_start(self, play):
        # The variable manager's inventory has no public accessor; without it only the play's keyword counts.
        names = inventory_connections(getattr(play.get_variable_manager(), "_inventory", None))
        if isinstance(play.connection, str) and play.connection and "{" not in play.connection:
            names.add(play.connection)
        for name in sorted(names - self._imported):
            try:
                connection_loader.get(name, class_only=True)
            except Exception:  # noqa: BLE001 - the worker reports a broken plugin as it always would
                pass
        self._imported |= names
