"""`make test` installs the Node.js the CDK synths need (scripts/ensure-node.sh), as
`make run` installs Chromium: on a machine without it, as root, through Debian's nodejs."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-node.sh"
MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _run(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    # PATH holds only the fakes: no node, whatever this machine has.
    return subprocess.run(
        ["/bin/bash", str(SCRIPT)],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_as_root_without_node_it_installs_debians_nodejs(tmp_path: Path) -> None:
    calls = tmp_path / "apt-calls"
    _tool(tmp_path, "id", "echo 0")
    # apt-get's install puts a node on PATH, as Debian's package does.
    fake = tmp_path / "node"
    node = f"printf '#!/bin/sh\\necho v20.19.2\\n' > {fake}; /bin/chmod 755 {fake}"
    _tool(tmp_path, "apt-get", f'echo "$*" >> {calls}\ncase "$*" in *install*) {node};; esac')
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    assert lines[0] == "update -qq"
    assert "install" in lines[1] and lines[1].split()[-1] == "nodejs"
    assert (tmp_path / "node").exists()


def test_without_root_it_names_the_command_to_run(tmp_path: Path) -> None:
    _tool(tmp_path, "id", "echo 1000")
    _tool(tmp_path, "apt-get", "exit 99")
    result = _run(tmp_path)
    assert result.returncode == 1
    assert "sudo apt-get install -y nodejs" in result.stderr


def test_a_node_on_path_is_used_as_it_is(tmp_path: Path) -> None:
    _tool(tmp_path, "id", "echo 0")
    _tool(tmp_path, "apt-get", "exit 99")  # never called
    _tool(tmp_path, "node", "echo v22.1.0")
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "v22.1.0" in result.stdout


def test_every_target_that_synthesizes_ensures_node_first() -> None:
    targets = {}
    for line in MAKEFILE.read_text().splitlines():
        name, sep, prerequisites = line.partition(":")
        if sep and not line.startswith(("\t", "#", " ")) and "=" not in name:
            targets[name] = prerequisites.split()
    for target in ("test", "test-fast", "synth", "deploy-check"):
        assert "ensure-node" in targets[target], target
