"""JupyterHub on one machine for openab: a team's people, each with their own pod, on one Linux host.

Each person is a Unix user of the machine (``adduser alice``) who signs in with their own password, and their pod,
``openab run --jupyterhub``, runs as that user, in their own home: one person's agent cannot read another's pod
state, keys or files (the kernel's file permissions, not a convention). The idle culler stops a pod an hour after
its last use, and the hub starts it again when its person's panel connects.

The proxy is a service of its own (configurable-http-proxy.service) and the hub leaves the pods running when it
stops, so restarting or upgrading the hub cuts no one's socket: handshakes made while it is down wait for it (503,
the panel redials), and the hub picks the running pods up from its database when it is back.

Install (docs/deploy.md, "A team on one machine"): this file as /etc/openab-hub/jupyterhub_config.py, run by
``/opt/openab/bin/jupyterhub`` (jupyterhub.service) from the venv that holds ``openab-browser[hub]``. The places to
change are marked ``# EDIT``.
"""

import pwd
import sys
from pathlib import Path
from typing import Any

c = get_config()  # noqa: F821 (given by JupyterHub when it loads this file)

# -- Where it listens ---------------------------------------------------------------------------------------------
# People reach the proxy (configurable-http-proxy.service, --port): put TLS in front of it (nginx, Caddy) or bind
# it to the team's network. The hub and the proxy's API stay on loopback.
c.JupyterHub.bind_url = "http://127.0.0.1:8000"  # the proxy's own address (its unit's --ip and --port)
c.JupyterHub.public_url = "http://127.0.0.1:8000"  # EDIT: the address people use, e.g. https://hub.example.org
c.JupyterHub.hub_bind_url = "http://127.0.0.1:8081"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:8001"
# The proxy runs apart (its token: CONFIGPROXY_AUTH_TOKEN, from /etc/openab-hub/proxy.env in both units), and
# the pods outlive the hub: a restart of the hub cuts nobody.
c.ConfigurableHTTPProxy.should_start = False
c.JupyterHub.cleanup_servers = False

c.JupyterHub.db_url = "sqlite:////srv/jupyterhub/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "/srv/jupyterhub/jupyterhub_cookie_secret"  # noqa: S105 (a path: made 0600)

# -- Who ------------------------------------------------------------------------------------------------------------
# PAM: each person signs in with their Unix account's password; only these people may.
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = {"alice", "bob"}  # EDIT: the team, each made with `adduser <name>`
c.Authenticator.admin_users = set()  # EDIT: who may stop and start others' pods on /hub/admin

# -- Each person's pod ----------------------------------------------------------------------------------------------
# LocalProcessSpawner starts the pod as the person's own Unix user, with HOME their home: the pod's state
# (~/.local/state/openab, 0700), the agents' files and their sessions are that person's alone. openab's is that
# spawner knowing its pod by more than a pid: a pod that ended while the hub was down (or before the machine
# restarted) is taken as gone, and the process the kernel gave its pid to is never signalled as the pod.
c.JupyterHub.spawner_class = "openab_browser.gateway.hub_spawner.PodSpawner"
# The openab installed beside this jupyterhub (pip install 'openab-browser[hub]' in the same venv).
c.Spawner.cmd = [str(Path(sys.executable).with_name("openab")), "run", "--jupyterhub"]
# A pod is up in about a second; a machine starting many at once is slower (docs/scaling.md).
c.Spawner.start_timeout = 60
c.Spawner.http_timeout = 30
# Pods starting at once, across the team: past this, a start is refused with 429 and the panel retries.
c.JupyterHub.concurrent_spawn_limit = 20  # EDIT: about 10 per core (docs/scaling.md, measured)
# A refused start is tried again after 5-15 s, not JupyterHub's 30-60 s (100 starts at once took 165 s, mostly
# waiting), and no more pods run than memory holds: a 429 is better than the OOM killer.
c.JupyterHub.spawn_throttle_retry_range = (5, 15)
c.JupyterHub.active_server_limit = 100  # EDIT: (RAM - 2 GiB) / 200 MiB a busy pod with the built-in agent
PORT_BASE = 20000


def port_of_person(spawner: Any) -> None:
    """Each person's pod listens on a port of their own (20000 + uid), never a random one: two pods starting
    at once on a random port can pick the same one, and the hub would send one person to the other's pod."""
    uid = pwd.getpwnam(spawner.user.name).pw_uid
    spawner.port = PORT_BASE + uid % (65535 - PORT_BASE)


c.Spawner.pre_spawn_hook = port_of_person

# -- Services -------------------------------------------------------------------------------------------------------
# The idle culler, run by the hub: a pod whose panel has been closed (no socket, no turn) for an hour is stopped;
# the person's panel starts it again with their own token. The four scopes are all it needs. It ends with the hub
# (setpriv's parent-death signal): the unit stops the hub alone (KillMode=process, so the pods go on), and a culler
# whose hub crashed would otherwise go on asking a hub that is gone, logging its failures every round, beside the
# new culler the restarted hub starts.
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        "command": ["setpriv", "--pdeathsig", "TERM", "--",
                    sys.executable, "-m", "jupyterhub_idle_culler", "--timeout=3600", "--cull-every=300"],
    },
]
c.JupyterHub.load_roles = [
    {
        "name": "idle-culler",
        "services": ["idle-culler"],
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    },
]
