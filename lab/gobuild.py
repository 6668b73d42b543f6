"""Upstream Go programs the lab runs, built from their Go modules and cached by version.

Builds go to ``${XDG_CACHE_HOME:-~/.cache}/gpuready/<name>-<version>/`` (never the source tree):
the first ``lab up`` compiles (minutes), later ones find the binaries there and start in seconds.
A build goes to a temporary folder renamed into place at the end, under a lock, so parallel runs
and an interrupted build never leave a half-written cache entry.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from gpuready.core.errors import Unreachable, shorten

log = logging.getLogger(__name__)
GOMOD = Path(__file__).parent / "gomod"
#: Where the Go distribution's installer puts it when it is not on PATH.
GO_FALLBACK = Path("/usr/local/go/bin/go")
#: Seconds between "still running" lines of a build in a pipe (a terminal's line refreshes every second).
PROGRESS_EVERY_S = 30.0
TERMINAL_REFRESH_S = 1.0


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuready"


def go_binary() -> str:
    found = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.exists() else None)
    if not found:
        raise Unreachable(
            "the lab builds its Kubernetes and vSphere parts from Go modules: install Go >= 1.24 "
            "(https://go.dev/dl/) or put it on PATH"
        )
    return found


def go_env() -> dict[str, str]:
    # Static binaries, and never a toolchain download behind the user's back.
    return {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}


def progress_every() -> float:
    """Seconds between progress lines in a pipe: $GPUREADY_PROGRESS_SECONDS, else :data:`PROGRESS_EVERY_S`.
    A terminal's line refreshes every second, or more often when this is shorter."""
    try:
        return max(0.1, float(os.environ.get("GPUREADY_PROGRESS_SECONDS", PROGRESS_EVERY_S)))
    except ValueError:
        return PROGRESS_EVERY_S


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m {rest:02d}s" if minutes else f"{rest}s"


@contextlib.contextmanager
def showing_progress(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """While the block runs, say that ``what`` still runs and for how long: on a terminal one line that refreshes
    every second, in a pipe (a CI log) a line every :func:`progress_every` seconds."""
    out = stream or sys.stderr
    tty = out.isatty()
    every = min(TERMINAL_REFRESH_S, progress_every()) if tty else progress_every()
    started = time.monotonic()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(every):
            elapsed = _clock(time.monotonic() - started)
            with contextlib.suppress(OSError, ValueError):
                out.write(f"\r{what}: {elapsed}\x1b[K" if tty else f"{what}: still running, {elapsed}\n")
                out.flush()

    thread = threading.Thread(target=tick, name="progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        if tty:
            with contextlib.suppress(OSError, ValueError):
                out.write("\r\x1b[K")
                out.flush()


def run_go(
    args: list[str], cwd: Path, what: str, logfile: Path | None = None, env: dict[str, str] | None = None
) -> str:
    out = logfile.open("ab") if logfile else None
    try:
        with showing_progress(f"{what} (go {args[0]})"):
            done = subprocess.run(
                [go_binary(), *args],
                cwd=cwd,
                env={**go_env(), **(env or {})},
                stdout=subprocess.PIPE,
                stderr=out or subprocess.PIPE,
                check=False,
            )
    finally:
        if out:
            out.close()
    if done.returncode != 0 and not (args[:2] == ["mod", "download"] and done.stdout):
        tail = logfile.read_text(errors="replace") if logfile else done.stderr.decode(errors="replace")
        last = [line for line in tail.strip().splitlines() if line.strip()][-1:] or ["no output"]
        where = f" (see {logfile})" if logfile else ""
        raise Unreachable(f"cannot {what}: go {args[0]} failed: {shorten(last[0], 200)}{where}")
    return done.stdout.decode()


def module_dir(module: str, version: str, checksum: str = "") -> Path:
    """The folder of ``module@version`` in Go's module cache, downloaded and verified first.

    Go verifies against the checksum database; for a version the database has no record of,
    ``checksum`` (the h1: hash that `go mod download -json` reports) pins it instead.
    """
    scratch = cache_root()
    scratch.mkdir(parents=True, exist_ok=True)
    env = {"GONOSUMDB": module} if checksum else None
    info = json.loads(
        run_go(
            ["mod", "download", "-json", f"{module}@{version}"],
            scratch,
            f"download the Go module {module}@{version}",
            env=env,
        )
    )
    if info.get("Error"):
        raise Unreachable(f"cannot download the Go module {module}@{version}: {shorten(info['Error'], 200)}")
    if checksum and info.get("Sum") != checksum:
        raise Unreachable(f"the Go module {module}@{version} has checksum {info.get('Sum')}, expected {checksum}")
    return Path(info["Dir"])


def _default_name(package: str) -> str:
    parts = package.rstrip("/").split("/")
    return parts[-2] if re.fullmatch(r"v\d+", parts[-1]) and len(parts) > 1 else parts[-1]


@contextlib.contextmanager
def _locked(path: Path, what: str = "") -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with showing_progress(f"waiting for another build of {what or path.stem.lstrip('.')}"):
                fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class GoBuild:
    """Commands built together from one module: a wrapper module of ours, or an upstream one at a version.

    ``wrapper`` names a folder under gomod/ holding go.mod/go.sum that pin everything (for modules
    whose own go.mod has replace directives, such as k8s.io/kubernetes); otherwise ``module`` at
    ``version`` is built as `go install` would. ``extras`` copies files out of module folders into
    the cache entry (stage definitions, CRDs), so a warm start needs neither Go nor the network.
    """

    name: str
    version: str
    commands: dict[str, str]
    wrapper: str = ""
    module: str = ""
    #: Extra -X settings for the linker (release versions the binaries report).
    ldflags: str = ""
    #: Go build tags, comma-separated (a module's documented switches, such as Prometheus's remove_all_sd).
    tags: str = ""
    extras: list[Callable[[Path], None]] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        return cache_root() / f"{self.name}-{self.version}-{self._digest()}"

    def _digest(self) -> str:
        # Tags join the digest only when set, so the cache entries built without them keep their names.
        what: list[object] = [self.commands, self.module, self.ldflags]
        h = hashlib.sha256(json.dumps([*what, self.tags] if self.tags else what).encode())
        if self.wrapper:
            for name in ("go.mod", "go.sum"):
                h.update((GOMOD / self.wrapper / name).read_bytes())
            # Programs of our own in the wrapper (one folder per command) are part of what gets built.
            for source in sorted((GOMOD / self.wrapper).glob("*/*.go")):
                h.update(source.relative_to(GOMOD).as_posix().encode() + source.read_bytes())
        return h.hexdigest()[:8]

    def binary(self, command: str) -> Path:
        return self.folder / "bin" / command

    def ensure(self) -> Path:
        """Build unless cached; return the cache folder."""
        if (self.folder / ".complete").exists():
            return self.folder
        with _locked(cache_root() / f".{self.name}.lock", f"{self.name} {self.version}"):
            if (self.folder / ".complete").exists():
                return self.folder
            self._build()
        return self.folder

    def _build(self) -> None:
        work = self.folder.with_name(self.folder.name + ".partial")
        shutil.rmtree(work, ignore_errors=True)
        (work / "bin").mkdir(parents=True)
        logfile = work / "build.log"
        log.warning("building %s %s from its Go module (first use; cached in %s)", self.name, self.version, self.folder)
        started = time.monotonic()
        flags = ["-trimpath", f"-ldflags=-s -w {self.ldflags}".strip(), *([f"-tags={self.tags}"] if self.tags else [])]
        packages = list(self.commands.values())
        if self.wrapper:
            run_go(
                ["build", *flags, "-o", str(work / "bin") + "/", *packages],
                GOMOD / self.wrapper,
                f"build {self.name} {self.version}",
                logfile,
            )
        else:
            env_bin = work / "bin"
            for package in packages:
                with logfile.open("ab") as out, showing_progress(f"build {self.name} {self.version} (go install)"):
                    done = subprocess.run(
                        [go_binary(), "install", *flags, f"{package}@{self.version}"],
                        cwd=work,
                        env={**go_env(), "GOBIN": str(env_bin), "GOFLAGS": ""},
                        stdout=subprocess.DEVNULL,
                        stderr=out,
                        check=False,
                    )
                if done.returncode != 0:
                    last = logfile.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
                    raise Unreachable(
                        f"cannot build {self.name} {self.version}: go install failed: "
                        f"{shorten(last[0], 200)} (see {logfile})"
                    )
        for command, package in self.commands.items():
            built = work / "bin" / _default_name(package)
            if built.name != command:
                built.rename(work / "bin" / command)
        for extra in self.extras:
            extra(work)
        (work / "build-seconds").write_text(f"{time.monotonic() - started:.0f}\n")
        (work / ".complete").write_text("")
        shutil.rmtree(self.folder, ignore_errors=True)
        work.rename(self.folder)
        log.warning("built %s %s in %.0fs", self.name, self.version, time.monotonic() - started)


def module_file(module: str, version: str, path: str, checksum: str = "") -> Path:
    """A file of ``module@version`` (a CRD, a manifest), kept in the cache so later runs need no Go."""
    target = cache_root() / "modules" / f"{module.replace('/', '_')}@{version}" / path
    if not target.exists():
        source = module_dir(module, version, checksum) / path
        if not source.is_file():
            raise Unreachable(f"the Go module {module}@{version} has no {path}")
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        shutil.copyfile(source, partial)
        partial.rename(target)
    return target
