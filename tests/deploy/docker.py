"""Docker for tests/deploy/test_compose.py: found or skipped, an offline base image cached by its inputs,
the project's wheels for that base's python, the shipped Dockerfile built from them, and docker-compose
driven over the shipped docker-compose.yml plus a test override.

Nothing is pulled: the base is made by debootstrap from Debian's mirror and imported, the image is
built with `--network none --pull=false` from that base (present locally, so the legacy builder never
asks a registry), and compose runs with `--no-build` on images that exist. Every command is bounded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
WHEELS = REPO / "build" / "compose" / "wheels"  # inside the build context (.dockerignore lets it in)
INSTALL = "apt-get install -y docker.io docker-compose debootstrap"
MIRROR = os.environ.get("KNOWLEDGE_DEBIAN_MIRROR", "http://deb.debian.org/debian")
SUITE = "bookworm"
INCLUDE = "python3,python3-venv,ca-certificates"
# Left out of the imported base: what apt and people read, never the application.
EXCLUDE = ("./var/cache/apt/archives/*.deb", "./var/cache/apt/*.bin", "./var/lib/apt/lists/*",
           "./usr/share/doc/*", "./usr/share/man/*", "./usr/share/locale/*")
IMAGE = "knowledge-pipeline:compose-test"


def missing_or_skip(missing: Sequence[str]) -> None:
    """Skip naming what is missing; fail instead under CI=true where apt-get exists (.ci/run installs it)."""
    if not missing:
        return
    message = f"needs {', '.join(missing)} ({INSTALL}, then dockerd running, as root)"
    if os.environ.get("CI") == "true" and shutil.which("apt-get") is not None:
        pytest.fail(message + " although apt-get is here (.ci/run installs and starts them)")
    pytest.skip(message)


def compose_command() -> list[str] | None:
    """`docker compose` (the v2 plugin) when it answers, else `docker-compose` (v1 or v2), else None."""
    if shutil.which("docker") is not None:
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose") is not None:
        return ["docker-compose"]
    return None


def require_docker() -> list[str]:
    """The compose command, once docker, a running daemon, compose, debootstrap and root are all here."""
    missing = []
    if shutil.which("docker") is None:
        missing.append("the docker client")
    elif subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        missing.append("a running dockerd (`docker info` fails)")
    compose = compose_command()
    if compose is None:
        missing.append("docker compose or docker-compose")
    if shutil.which("debootstrap") is None:
        missing.append("debootstrap")
    if os.geteuid() != 0:
        missing.append("root (debootstrap)")
    missing_or_skip(missing)
    assert compose is not None
    return compose


def run(args: Sequence[str], timeout: float, env: Mapping[str, str] | None = None, check: bool = True,
        cwd: Path | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command, bounded by timeout; with check, fail showing its output when it exits non-zero."""
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout, env=dict(env) if env else None,
                          cwd=cwd, input=stdin.decode() if stdin is not None else None)
    if check:
        assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n" \
                                     f"{done.stderr[-3000:]}"
    return done


def image_exists(tag: str) -> bool:
    return run(["docker", "image", "inspect", tag], 60, check=False).returncode == 0


def base_image() -> tuple[str, bool]:
    """(tag, built now): a Debian base with python3 and its venv module, made by debootstrap and imported,
    tagged by the hash of its inputs, so it is made once per machine (about a minute or two)."""
    recipe = json.dumps({"suite": SUITE, "variant": "minbase", "include": INCLUDE, "mirror": MIRROR,
                         "exclude": EXCLUDE, "recipe": 1}, sort_keys=True)
    tag = f"knowledge-base:{hashlib.sha256(recipe.encode()).hexdigest()[:16]}"
    if image_exists(tag):
        return tag, False
    with tempfile.TemporaryDirectory(prefix="knowledge-base-", dir="/var/tmp") as scratch:
        rootfs = Path(scratch) / "rootfs"
        run(["debootstrap", "--variant=minbase", f"--include={INCLUDE}", SUITE, str(rootfs), MIRROR], 900)
        excludes = [f"--exclude={pattern}" for pattern in EXCLUDE]
        tar = subprocess.Popen(["tar", "-C", str(rootfs), *excludes, "-c", "."], stdout=subprocess.PIPE)
        try:
            imported = subprocess.run(["docker", "import", "-", tag], stdin=tar.stdout, capture_output=True,
                                      text=True, timeout=300)
        finally:
            assert tar.stdout is not None
            tar.stdout.close()
            tar.wait(timeout=300)
        assert imported.returncode == 0 and tar.returncode == 0, imported.stderr
    return tag, True


def python_of(base: str) -> str:
    """The version of the base image's python3 (e.g. 3.11.2)."""
    answer = run(["docker", "run", "--rm", "--network", "none", "--pull", "never", "--entrypoint", "python3", base,
                  "-c", "import platform; print(platform.python_version())"], 120)
    return answer.stdout.strip()


def host_python(version: str) -> str:
    """A python on this host of exactly that version with pip: its wheels and markers (redis wants
    async-timeout below 3.11.3) are then the base's. Skipped (failed under CI) when there is none."""
    candidates = [os.environ.get("KNOWLEDGE_WHEEL_PYTHON", ""), "/usr/bin/python3", shutil.which("python3.11") or "",
                  shutil.which("python3") or ""]
    for candidate in dict.fromkeys(c for c in candidates if c):
        probe = subprocess.run([candidate, "-c", "import platform, pip; print(platform.python_version())"],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    missing_or_skip([f"a python {version} with pip on this host (Debian: python3-pip), to build the base's wheels"])
    raise AssertionError("unreachable")


def gather_wheels(python: str, version: str) -> Path:
    """The project's wheel and every dependency's in WHEELS; the dependencies are gathered again only when
    pyproject.toml or the python changed, the project's wheel every time."""
    key = hashlib.sha256((REPO / "pyproject.toml").read_bytes() + version.encode()).hexdigest()
    stamp = WHEELS / ".key"
    quiet = ["--disable-pip-version-check", "-q"]
    if stamp.exists() and stamp.read_text() == key:
        for old in WHEELS.glob("knowledge_pipeline-*.whl"):
            old.unlink()
        run([python, "-m", "pip", "wheel", *quiet, "--no-deps", "-w", str(WHEELS), str(REPO)], 600, cwd=REPO)
    else:
        shutil.rmtree(WHEELS, ignore_errors=True)
        WHEELS.mkdir(parents=True)
        run([python, "-m", "pip", "wheel", *quiet, "-w", str(WHEELS), str(REPO)], 900, cwd=REPO)
        stamp.write_text(key)
    assert list(WHEELS.glob("knowledge_pipeline-*.whl")), "pip wheel made no wheel of the project"
    return WHEELS


def build_image(base: str, wheels: Path, tag: str = IMAGE) -> str:
    """Build the shipped Dockerfile offline on base with the wheels; the image's id. The image this tag
    named before is removed when the build replaced it, and so is the build stage's untagged image."""
    before = run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], 60, check=False).stdout.strip()
    run(["docker", "build", "-q", "--network", "none", "--pull=false", "--build-arg", f"BASE_IMAGE={base}",
         "--build-arg", f"WHEELS={wheels.relative_to(REPO)}", "-t", tag, str(REPO)], 900)
    after = run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], 60).stdout.strip()
    if before and before != after:
        run(["docker", "rmi", before], 120, check=False)
    # The legacy builder keeps the build stage as an untagged image; its layers are of no later use (the
    # project's wheel differs every build), so they are removed rather than left to pile up.
    run(["docker", "image", "prune", "-f", "--filter", "label=knowledge.stage=build"], 120, check=False)
    return after


def image_size(tag: str) -> int:
    return int(run(["docker", "image", "inspect", "--format", "{{.Size}}", tag], 60).stdout.strip())


class Compose:
    """docker-compose over compose files in the repository's directory, as one project, every call bounded."""

    def __init__(self, command: list[str], project: str, files: Sequence[Path], env: Mapping[str, str]) -> None:
        self.command = command
        self.project = project
        self.anonymous: set[str] = set()  # unnamed volumes its containers made, removed with the stack
        # Relative paths (./deploy/...) resolve against the repository, as for the shipped file.
        self.files = ["--project-directory", str(REPO), *(a for f in files for a in ("-f", str(f)))]
        self.env = {**os.environ, **env}

    def args(self, *args: str) -> list[str]:
        return [*self.command, "-p", self.project, *self.files, *args]

    def __call__(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(self.args(*args), timeout, env=self.env, check=check, cwd=REPO)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.args(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.env, cwd=REPO)

    def knowledge(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`knowledge ARGS` in a one-off container of the `index` service (the store, the tree, /published)."""
        return self("run", "--rm", "-T", "--no-deps", "index", *args, timeout=timeout, check=check)

    def containers(self, service: str) -> list[str]:
        """The ids of the service's containers, running or not."""
        return self("ps", "-q", service, timeout=60).stdout.split()

    def logs(self) -> str:
        done = self("logs", "--no-color", "--tail", "40", timeout=60, check=False)
        return done.stdout[-8000:] + done.stderr[-2000:]


def inspect(container: str) -> dict[str, Any]:
    answer: list[dict[str, Any]] = json.loads(run(["docker", "inspect", container], 60).stdout)
    return answer[0]


def wait_healthy(containers: Sequence[str], seconds: float, logs: Compose) -> None:
    """Wait (bounded) until every container's HEALTHCHECK reports healthy; fail with the last probe's output."""
    deadline = time.monotonic() + seconds
    while True:
        states = {}
        for container in containers:
            state = inspect(container)["State"]
            health = state.get("Health") or {}
            states[container[:12]] = (state.get("Status"), health.get("Status"), (health.get("Log") or [{}])[-1])
        if all(status == "running" and healthy == "healthy" for status, healthy, _ in states.values()):
            return
        assert time.monotonic() < deadline, f"not healthy within {seconds}s: {states}\n{logs.logs()}"
        time.sleep(1)
