"""This bridge's Codex brought along, to a container or an ssh machine's cache folder: where
it goes, what runs there, and what says whether a copy found there may be run."""

from __future__ import annotations

import contextlib
import json
import shlex
from pathlib import Path

from .places import ssh_argv
from .spec import MachineSpec

#: Where the bridge copies its Codex's vendor folder in a container (``{version}``: its own).
BROUGHT_FOLDER = "/tmp/codex-acp-bridge-codex-{version}"
#: A container image's architecture (podman's and docker's words) → a Rust target's.
_ARCHITECTURES = {"amd64": "x86_64", "x86_64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64"}


def brought_folder(version: str) -> str:
    """Where Codex ``version``, brought by the bridge, is in a container."""
    return BROUGHT_FOLDER.format(version=version)


def vendor_folder(program: str) -> tuple[Path, str, str | None] | None:
    """The vendor folder of the Codex package ``program`` (the native binary the bridge
    runs) is in, its Rust target (``x86_64-unknown-linux-musl``) and its version when the
    folder says it (``codex-package.json``); ``None`` when
    ``program`` is not a package's ``vendor/TARGET/bin/codex``. The whole folder is what
    runs elsewhere: the binary alone says it is 0.0.0 and has no bundled bubblewrap."""
    binary = Path(program).resolve()
    folder = binary.parent.parent
    if binary.parent.name != "bin" or folder.parent.name != "vendor":
        return None
    target, version = folder.name, None
    with contextlib.suppress(OSError, ValueError):
        described = json.loads((folder / "codex-package.json").read_text(encoding="utf-8"))
        if isinstance(described, dict):
            if isinstance(described.get("target"), str):
                target = described["target"]
            if isinstance(described.get("version"), str):
                version = described["version"]
    return folder, target, version


def runs_there(target: str, platform: str) -> bool:
    """Whether a Codex built for ``target`` runs in a container of ``platform``
    (``linux/amd64``, as ``podman image inspect`` says it)."""
    os_name, _, architecture = platform.strip().partition("/")
    wanted = _ARCHITECTURES.get(architecture.split("/")[0])
    return os_name == "linux" and "-linux-" in target and target.split("-")[0] == wanted


def image_argv(spec: MachineSpec) -> list[str]:
    """What says which image a container runs (its ID)."""
    return [spec.scheme, "container", "inspect", "--format", "{{.Image}}", spec.host]


def platform_argv(spec: MachineSpec, image: str) -> list[str]:
    """What says an image's platform: ``linux/amd64``."""
    return [spec.scheme, "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", image]


def copy_argv(
    spec: MachineSpec, source: Path, folder: str, ssh: list[str] | None = None
) -> list[str]:
    """What copies the folder ``source`` here to ``folder`` in the container (which must
    not exist yet: ``cp`` would put it inside); on an ssh machine, a tar stream through
    ssh's stdin into that folder there."""
    if spec.ssh:
        quoted = shlex.quote(folder)
        remote = ssh_argv(spec, ssh or ["ssh"], f"mkdir -p {quoted} && tar -xf - -C {quoted}")
        return ["sh", "-c", 'cd "$1" && shift && tar -cf - . | "$@"', "sh", str(source), *remote]
    return [spec.scheme, "cp", str(source), f"{spec.host}:{folder}"]


def rename_argv(
    spec: MachineSpec, part: str, folder: str, ssh: list[str] | None = None
) -> list[str]:
    """What renames the folder ``part`` to ``folder`` there, at once, unless a ``folder``
    with something in it is there (``mv -T`` refuses it)."""
    return there_argv(spec, ssh, ["mv", "-T", part, folder])


def remove_argv(spec: MachineSpec, path: str, ssh: list[str] | None = None) -> list[str]:
    """What removes ``path`` (a folder of the bridge's) there."""
    return there_argv(spec, ssh, ["rm", "-rf", path])


def owners_argv(spec: MachineSpec, folder: str) -> list[str]:
    """What says, in a container, who runs there (``id -u``, as the link's user) and the
    owner and mode of ``folder`` and of its ``bin/codex`` (``stat``): a folder of /tmp is
    anyone's to make first."""
    user = ["--user", spec.user] if spec.user else []
    script = 'id -u && stat -c "%u %a" -- "$1" "$1/bin/codex"'
    return [spec.scheme, "exec", *user, spec.host, "sh", "-c", script, "sh", folder]


def foreign(said: str) -> str | None:
    """What :func:`owners_argv` said, judged: why the folder is not to be run from (owned
    by another user than root or the link's, or writable by others), else ``None``."""
    lines = said.split()
    if len(lines) < 5:
        return None
    uid, pairs = lines[0], list(zip(lines[1::2], lines[2::2], strict=False))
    for owner, mode in pairs:
        if owner not in ("0", uid):
            return f"owned by uid {owner}, not by root or the user Codex runs as ({uid})"
        if int(mode, 8) & 0o022:
            return f"writable by others (mode {mode})"
    return None


def there_argv(spec: MachineSpec, ssh: list[str] | None, argv: list[str]) -> list[str]:
    if spec.ssh:
        return ssh_argv(spec, ssh or ["ssh"], shlex.join(argv))
    return [spec.scheme, "exec", spec.host, *argv]


#: What an ssh machine says of itself for the bridge to bring its Codex there: its
#: system, its architecture (``uname``) and its user's cache folder.
SSH_FACTS = 'uname -s -m && printf "%s\\n" "${XDG_CACHE_HOME:-$HOME/.cache}"'


def ssh_facts(said: str, version: str) -> tuple[str, str] | None:
    """What :data:`SSH_FACTS` said: the machine's platform (``linux/x86_64``) and where
    Codex ``version`` goes there; ``None`` when it said something else."""
    lines = said.strip().splitlines()
    if len(lines) != 2 or len(lines[0].split()) != 2 or not lines[1].startswith("/"):
        return None
    system, machine = lines[0].split()
    return f"{system.lower()}/{machine}", f"{lines[1]}/codex-acp-bridge/codex-{version}"
