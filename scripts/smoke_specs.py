"""What the synthesized task definition and the worker's Dockerfile say, read for the smoke run."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from typing import Any


class SmokeFailed(RuntimeError):
    pass


# --- what the task definition and the image say ----------------------------------------
@dataclass(frozen=True)
class TaskSpec:
    env: dict[str, Any]
    writable: list[str]
    read_only_root: bool
    dropped: list[str]
    init: bool
    health_check: list[str]


def task_spec(template: dict[str, Any], pool: str) -> TaskSpec:
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::ECS::TaskDefinition":
            continue
        for container in resource["Properties"]["ContainerDefinitions"]:
            env = {e["Name"]: e["Value"] for e in container.get("Environment", [])}
            if container["Name"] == "Worker" and env.get("PAGEFLEET_POOL") == pool:
                linux = container.get("LinuxParameters", {})
                return TaskSpec(
                    env=env,
                    writable=[m["ContainerPath"] for m in container.get("MountPoints", [])],
                    read_only_root=bool(container.get("ReadonlyRootFilesystem")),
                    dropped=linux.get("Capabilities", {}).get("Drop", []),
                    init=bool(linux.get("InitProcessEnabled")),
                    health_check=container.get("HealthCheck", {}).get("Command", []),
                )
    raise SmokeFailed(f"no Worker container for pool {pool!r} in the template")


@dataclass(frozen=True)
class ImageSpec:
    user: str
    volumes: list[str]
    env: dict[str, str]
    # path -> (owner, mode) as the image leaves it, for declared volumes.
    dirs: dict[str, tuple[str, int]]


def image_spec(dockerfile: str) -> ImageSpec:
    """The final stage's USER, VOLUMEs, ENV and the owner/mode it gives directories."""
    text = dockerfile.replace("\\\n", " ")
    final = text.split("\nFROM ")[-1]
    user = "root"
    volumes: list[str] = []
    env: dict[str, str] = {}
    dirs: dict[str, tuple[str, int]] = {}
    for line in final.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "USER":
            user = rest.strip().split(":")[0]
        elif word == "VOLUME":
            volumes += json.loads(rest) if rest.strip().startswith("[") else rest.split()
        elif word == "ENV":
            for pair in shlex.split(rest):
                name, _, value = pair.partition("=")
                env[name] = value
        elif word == "RUN":
            for owner, mode, path in re.findall(r"install -d -o (\S+) -g \S+ -m (\d+) (\S+)", rest):
                dirs[path] = (owner, int(mode, 8))
            for mode, path in re.findall(r"chmod (\d+) (\S+)", rest):
                owner = dirs.get(path, ("root", 0))[0]
                dirs[path] = (owner, int(mode, 8))
    return ImageSpec(user, volumes, env, dirs)


def fargate_volume(path: str, image: ImageSpec) -> tuple[str, int]:
    """(owner, mode) of the empty directory Fargate mounts at ``path``."""
    if path in image.volumes:
        return image.dirs.get(path, ("root", 0o755))
    return ("root", 0o755)
