"""Machines the user names, where sessions may act: parsed, read from their file, and the
commands that reach them. No trio, no sockets (the shell's link runs them:
``bridge/shell/machine_link.py``). Its modules: :mod:`~bridge.machines.spec` (a machine, its
kinds), :mod:`~bridge.machines.urls`, :mod:`~bridge.machines.devcontainers`,
:mod:`~bridge.machines.sandboxes` and :mod:`~bridge.machines.file` (where machines come from),
:mod:`~bridge.machines.places` (the commands that reach one) and
:mod:`~bridge.machines.brought` (this bridge's Codex brought there); all they offer is here.

A machine is ``NAME=URL``:

- ``ssh://[USER@]HOST[:PORT][/PATH][?codex=/path/to/codex]``: the bridge runs the user's
  own ``ssh`` (or ``--ssh-command``, as git's ``GIT_SSH_COMMAND``) to start
  ``codex exec-server --listen stdio`` on HOST, over the SSH channel itself: nothing
  listens on HOST, and here only on loopback;
- ``podman://CONTAINER[/PATH][?user=USER][&codex=/path/to/codex]`` (or ``docker://``): a
  running container, reached with ``podman exec -i [--user USER] CONTAINER CODEX
  exec-server --listen stdio`` (the runtime found on ``PATH``, with this process's
  environment: ``CONTAINERS_CONF``, ``DOCKER_HOST``...). Without ``?codex=``, where the
  container has no ``codex`` of this bridge's Codex version, the bridge brings its own
  (:attr:`MachineSpec.bring`): the whole vendor folder of the Codex it runs, copied with
  ``podman cp`` into :func:`brought_folder` once per container and version;
  ``?codex=auto`` brings it whatever the container has;
- ``devcontainer:///LOCAL/FOLDER[?runtime=podman][&user=USER][&codex=...][&path=/IN/IT]``
  (or ``devcontainer://~/FOLDER``): the folder's dev container, brought up with the
  devcontainers CLI (``devcontainer up --workspace-folder FOLDER``: the user's
  ``devcontainer.json``, the runtime it is given with ``--docker-path``, docker by default)
  at each check, then reached as a container of that runtime (:func:`up_container`);
  its sessions work in the container's workspace folder (``workspaceFolder`` of the
  configuration, else ``/workspaces/FOLDER-NAME``, as the CLI mounts it); Codex is
  brought as for a container;
- a machines-file entry with ``command = [ARGV...]`` and no URL: any command that runs
  what follows it somewhere (``kubectl exec -i POD --``, ``devcontainer exec ...``), given
  ``CODEX exec-server --listen stdio`` after its own words (``codex = "/path"``: the Codex
  there);
- ``ws://HOST:PORT[/PATH]`` (or ``wss://``) with a token file: an exec-server someone runs
  already, registered with Codex as it is. Its token goes in plain text over ``ws://``, so
  that is refused for a host that is not loopback (:mod:`bridge.token_urls`): such a
  machine is ``wss://``, or an ssh machine.

``PATH`` is where the machine's sessions work (without it, the session's own ``cwd``, as a
path on that machine). The machines file (:func:`machines_file`) is TOML, a table per
machine; flags add to it, and a flag's machine replaces the file's of the same name::

    [devbox]
    url = "ssh://me@devbox.example.com/home/me/src"
    description = "the team's build box"

    [gpu]
    url = "ws://127.0.0.1:4600"
    token_file = "~/.config/codex-acp-bridge/gpu.token"

    [pod]
    command = ["kubectl", "exec", "-i", "-n", "dev", "pod/devbox", "--"]
    codex = "/opt/codex/bin/codex"
    path = "/src"

All but ws:// machines are places the bridge reaches with a command of its own, whose
stdio is then an exec-server (:func:`exec_server_argv`): the link relays it to Codex.
"""

from __future__ import annotations

from .brought import (
    BROUGHT_FOLDER,
    SSH_FACTS,
    brought_folder,
    copy_argv,
    foreign,
    image_argv,
    owners_argv,
    platform_argv,
    remove_argv,
    rename_argv,
    runs_there,
    ssh_facts,
    there_argv,
    vendor_folder,
)
from .devcontainers import (
    devcontainer_config,
    devcontainer_machine,
    up_argv,
    up_container,
    workspace_folder,
)
from .file import (
    command_machine,
    gather,
    machines_file,
    read_machines_file,
    ssh_command,
)
from .places import (
    codex_hint,
    codex_version,
    exec_server_argv,
    exec_server_command,
    explain_failure,
    place_argv,
    program,
    ssh_argv,
    version_argv,
    version_command,
    version_first,
)
from .sandboxes import (
    sandbox_box,
    sandbox_container,
    sandbox_machine,
    sandbox_run_argv,
)
from .spec import (
    AUTO,
    BRING_ALWAYS,
    BRING_IF_NEEDED,
    COMMAND,
    CONTAINER_NAME,
    DEVCONTAINER,
    ENV_MACHINES_FILE,
    ENV_SSH_COMMAND,
    OWNER_LABEL,
    RELAYED,
    RUNTIMES,
    SANDBOX,
    SANDBOX_CODEX_DIR,
    SANDBOX_LABEL,
    SESSION_MARK,
    SSH_OPTIONS,
    MachineError,
    MachineSpec,
    check_name,
    kind_and_where,
    token_refusal,
)
from .urls import (
    parse_flag,
    parse_url,
)

__all__ = [
    "AUTO",
    "BRING_ALWAYS",
    "BRING_IF_NEEDED",
    "BROUGHT_FOLDER",
    "COMMAND",
    "CONTAINER_NAME",
    "DEVCONTAINER",
    "ENV_MACHINES_FILE",
    "ENV_SSH_COMMAND",
    "OWNER_LABEL",
    "RELAYED",
    "RUNTIMES",
    "SANDBOX",
    "SANDBOX_CODEX_DIR",
    "SANDBOX_LABEL",
    "SESSION_MARK",
    "SSH_FACTS",
    "SSH_OPTIONS",
    "MachineError",
    "MachineSpec",
    "brought_folder",
    "check_name",
    "codex_hint",
    "codex_version",
    "command_machine",
    "copy_argv",
    "devcontainer_config",
    "devcontainer_machine",
    "exec_server_argv",
    "exec_server_command",
    "explain_failure",
    "foreign",
    "gather",
    "image_argv",
    "kind_and_where",
    "machines_file",
    "owners_argv",
    "parse_flag",
    "parse_url",
    "place_argv",
    "platform_argv",
    "program",
    "read_machines_file",
    "remove_argv",
    "rename_argv",
    "runs_there",
    "sandbox_box",
    "sandbox_container",
    "sandbox_machine",
    "sandbox_run_argv",
    "ssh_argv",
    "ssh_command",
    "ssh_facts",
    "there_argv",
    "token_refusal",
    "up_argv",
    "up_container",
    "vendor_folder",
    "version_argv",
    "version_command",
    "version_first",
    "workspace_folder",
]
