"""The Codex at a machine: ``CODEX --version`` there against this bridge's own, and, where the
user named none (or said ``?codex=auto``) and the machine's will not do, this bridge's Codex
brought there: its vendor folder copied into the container (``podman cp``) or to the ssh
machine's cache folder (a tar stream), once per place and version, beside and then renamed,
so that two bridges copying at once leave one whole copy. A copy found in a container's
``/tmp`` is run only when it is root's or the link's user's and no one else can write it.
What it finds is kept on the link (:class:`~bridge.shell.link_record.Link`: ``version``,
``brought``)."""

from __future__ import annotations

import logging
import secrets
import shlex
from dataclasses import replace

import trio

from .. import machines as spec_of
from ..machines import MachineSpec
from .link_record import Link, in_use
from .processes import CHECK_SECONDS, could_not_run, finished, output, run

log = logging.getLogger(__name__)

#: How long copying Codex into a container may take (some 400 MB).
COPY_SECONDS = 300.0


class CodexThere:
    """The Codex of the machines of one Codex (``serve``'s own, or the daemon's): checked,
    and brought where it must be."""

    def __init__(
        self, ssh: list[str], codex_program: str | None, codex_version: str | None
    ) -> None:
        self.ssh = ssh
        self.codex_program = codex_program
        #: The version the machines' Codex must have: ``codex_version`` when given (what
        #: the daemon's Codex said it is: ``codex-cli 0.171.0``; nothing to compare when it
        #: says none), else ``codex_program --version``'s, asked once.
        self._local_version: str | None = (
            None if codex_version is None else spec_of.codex_version(codex_version) or ""
        )

    async def local_version(self) -> str | None:
        """The version of the Codex this bridge runs (the remote one must match)."""
        if self._local_version is None and self.codex_program:
            try:
                done = await trio.run_process(
                    [self.codex_program, "--version"], capture_stdout=True, check=False
                )
                self._local_version = spec_of.codex_version(done.stdout.decode(errors="replace"))
            except OSError:
                self._local_version = ""
        return self._local_version or None

    async def check_codex(self, link: Link, spec: MachineSpec) -> tuple[str | None, str]:
        """``spec.codex --version`` there: why it will not do (``None``: it will), and
        what that is: ``ok``, ``missing``, ``other`` (another version, or no version) or
        ``failed`` (the machine itself: unreachable, no container...)."""
        argv = spec_of.version_argv(spec, self.ssh)
        done = await finished(argv, CHECK_SECONDS)
        if isinstance(done, trio.TooSlowError):
            return f"no answer from {spec.where()} within {CHECK_SECONDS:.0f} s", "failed"
        if isinstance(done, OSError):
            return could_not_run(argv, done), "failed"
        stderr = done.stderr.decode(errors="replace")
        if done.returncode != 0:
            why = spec_of.explain_failure(spec, done.returncode, stderr)
            # 126/127: the runtime ran, the program in the container could not.
            return why, "missing" if done.returncode in (126, 127) else "failed"
        mismatch = await self.version_mismatch(link, done.stdout.decode(errors="replace"), spec)
        return mismatch, "other" if mismatch else "ok"

    async def check_or_bring(self, link: Link) -> str | None:
        spec = link.container or link.spec
        if link.brought:  # brought before: still there (a container made anew has not)?
            why, kind = await self.check_codex(link, in_use(link))
            if why is None or kind == "failed":
                return why
            link.brought = None
        if spec.bring == spec_of.BRING_IF_NEEDED:
            why, kind = await self.check_codex(link, spec)
            if why is None or kind == "failed":
                return why
            log.info("machine %s: its own Codex will not do (%s)", spec.name, why)
        return await self._bring(link)

    async def _bring(self, link: Link) -> str | None:
        """Copy this bridge's Codex into the container, or the ssh machine's cache folder
        (unless a copy is there already), and use it; else why not, in one line naming the
        machine."""
        spec = link.container or link.spec
        cannot = (
            f"cannot bring Codex into {spec.where()}"
            if not spec.ssh
            else (f"cannot bring Codex to {spec.where()}")
        )
        name_one = f"install Codex there and name it with {spec_of.codex_hint(spec)}"
        local = await self.local_version()
        found = spec_of.vendor_folder(self.codex_program) if self.codex_program else None
        if local is None or found is None:
            return (
                f"{cannot}: this bridge's Codex ({self.codex_program or 'none found'}) is not "
                f"in a Codex package's vendor folder to copy: {name_one}"
            )
        source, target, version = found
        if version is not None and version != local:
            return (
                f"{cannot}: this bridge's Codex is {version}, the one it works with {local}: "
                f"{name_one}"
            )
        platform = ""
        if spec.ssh:
            facts = await self._ssh_facts(spec, local)
            if facts.startswith("!"):
                return f"{cannot}: {facts[1:]}"
            platform, _, folder = facts.partition(" ")
        else:
            folder = spec_of.brought_folder(local)
        there = replace(spec, codex=f"{folder}/bin/codex")
        remove_it = shlex.join(self._removal(spec, folder))
        why, kind = await self.check_codex(link, there)
        if why is None and (untrusted := await self._foreign(spec, folder)) is not None:
            return f"{cannot}: {folder} there is {untrusted}: remove it ({remove_it}) and try again"
        if why is None:
            log.info(
                "machine %s: using Codex %s brought into %s earlier, at %s",
                spec.name,
                local,
                spec.where(),
                folder,
            )
            link.brought = there.codex
            return None
        remove = f"remove it ({remove_it}) and try again"
        if kind != "missing":
            return (
                why
                if kind == "failed"
                else f"{cannot}: {folder} there holds no working Codex {local} ({why}): {remove}"
            )
        platform = platform or await self._platform(spec)
        if platform.startswith("!"):
            return f"{cannot}: {platform[1:]}"
        if not spec_of.runs_there(target, platform):
            return (
                f"{cannot}: {'it' if spec.ssh else 'the container'} is {platform}, this "
                f"bridge's Codex is built for {target}: {name_one}"
            )
        log.info(
            "machine %s: no Codex %s in %s: copying this bridge's (%s) to %s",
            spec.name,
            local,
            spec.where(),
            source,
            folder,
        )
        started = trio.current_time()
        # Copied beside, then renamed: a copy cut short, or another bridge's copying at the
        # same moment (the daemon's and an editor's), never leaves a half folder at
        # ``folder``; of two copies the first renamed is used, the other removed.
        part = f"{folder}.part-{secrets.token_hex(4)}"
        failed = await run(spec_of.copy_argv(spec, source, part, self.ssh), COPY_SECONDS)
        if failed is not None:
            await run(spec_of.remove_argv(spec, part, self.ssh), CHECK_SECONDS)
            return f"{cannot}: {failed}"
        renamed = await run(spec_of.rename_argv(spec, part, folder, self.ssh), CHECK_SECONDS)
        if renamed is not None and not spec.ssh and "executable file not found" in renamed:
            # A container with no mv (nothing but Codex's own files, say): this bridge runs
            # its own copy where it is; the next one copies again.
            log.info(
                "machine %s: no mv in %s: running Codex from %s", spec.name, spec.where(), part
            )
            folder, there = part, replace(spec, codex=f"{part}/bin/codex")
        elif renamed is not None:
            log.info("machine %s: not renamed to %s (%s)", spec.name, folder, renamed)
            await run(spec_of.remove_argv(spec, part, self.ssh), CHECK_SECONDS)
        why, _kind = await self.check_codex(link, there)
        if why is not None:
            # A folder of that name there already, not empty, with no working Codex: an
            # older bridge's copy cut short, or someone else's.
            return f"{cannot}: the copy at {folder} does not run there ({why}): {remove}"
        if (untrusted := await self._foreign(spec, folder)) is not None:
            # Another copy renamed first: someone else's, it seems.
            return f"{cannot}: {folder} there is {untrusted}: {remove}"
        log.info(
            "machine %s: Codex %s copied into %s at %s in %.1f s",
            spec.name,
            local,
            spec.where(),
            folder,
            trio.current_time() - started,
        )
        link.brought = there.codex
        return None

    async def _foreign(self, spec: MachineSpec, folder: str) -> str | None:
        """Why the Codex at ``folder`` in a container is not to be run (another user's, or
        writable by others: the container's /tmp is anyone's to fill first); ``None`` when it
        is this link's user's or root's, or when the container cannot say (no shell)."""
        if spec.ssh:
            return None  # the user's own cache folder
        said = await output(spec_of.owners_argv(spec, folder), CHECK_SECONDS)
        if said.startswith("!"):
            log.debug("machine %s: owners of %s not known: %s", spec.name, folder, said[1:])
            return None
        return spec_of.foreign(said)

    def _removal(self, spec: MachineSpec, folder: str) -> list[str]:
        """What a person runs to remove ``folder`` there: as the bridge would, without its
        ssh options (a terminal's ssh)."""
        if spec.ssh:
            return [*self.ssh, spec.host, shlex.join(["rm", "-rf", folder])]
        return [spec.scheme, "exec", spec.host, "rm", "-rf", folder]

    async def _ssh_facts(self, spec: MachineSpec, version: str) -> str:
        """``PLATFORM FOLDER`` of an ssh machine (:func:`bridge.machines.ssh_facts`), or
        ``!`` and why they are not known."""
        said = await output(spec_of.ssh_argv(spec, self.ssh, spec_of.SSH_FACTS), CHECK_SECONDS)
        if said.startswith("!"):
            return said
        facts = spec_of.ssh_facts(said, version)
        if facts is None:
            return f"!{spec.where()} said {said!r} of itself, not its system and a folder"
        return " ".join(facts)

    async def _platform(self, spec: MachineSpec) -> str:
        """The container's platform (``linux/amd64``), or ``!`` and why it is not known."""
        image = await output(spec_of.image_argv(spec), CHECK_SECONDS)
        if image.startswith("!"):
            return image
        return await output(spec_of.platform_argv(spec, image), CHECK_SECONDS)

    async def version_mismatch(
        self, link: Link, line: str, spec: MachineSpec | None = None
    ) -> str | None:
        spec = spec or link.spec
        remote = spec_of.codex_version(line)
        if remote is None:
            return f"{spec.codex!r} on {spec.where()} said {line.strip()!r}, not a version"
        link.version = remote
        local = await self.local_version()
        if local is not None and remote != local:
            return (
                f"{link.spec.where()} runs Codex {remote}, this machine {local}: install Codex "
                f"{local} there (npm install -g @openai/codex@{local}), or name one with "
                f"{spec_of.codex_hint(link.spec)}"
            )
        return None
