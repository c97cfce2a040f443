"""Run the worker the way its Fargate task definition runs it, here, and one real job through it.

    .venv/bin/python scripts/worker_smoke.py \
        --template cdk.out/deploy-check/prod/pagefleet-prod.template.json

Docker cannot run here, so bubblewrap reproduces the task definition's constraints:
- the root filesystem read-only (``readonlyRootFilesystem``);
- a non-root user (the image's ``USER``) with no capabilities (``drop: ALL``), no new
  privileges, and no user namespaces (Fargate applies Docker's default seccomp profile,
  which refuses them without CAP_SYS_ADMIN; a filter here does the same);
- writable only the task's mount points, each an empty directory as Fargate creates a bind
  mount: root-owned 0755, unless the Dockerfile declares the path a ``VOLUME``, when it
  starts as the image makes it (owner and mode from the Dockerfile's ``install -d`` /
  ``chmod`` of that path);
- its own PID namespace with an init (``initProcessEnabled``);
- the environment of the synthesized task definition (its ``PAGEFLEET_*`` and Powertools
  variables; table, queue and bucket names replaced by a local embedded AWS's) plus the
  Dockerfile's ``ENV`` (paths mapped to this checkout), pointed at that embedded AWS.
  One deviation: ``PAGEFLEET_ALLOW_LOOPBACK=true``, since the test page is on 127.0.0.1.
- the image's Playwright registry (``PLAYWRIGHT_BROWSERS_PATH``, /ms-playwright) mapped to
  a directory of this checkout laid out the same way, holding the ffmpeg the installed
  driver asks for (``ffmpeg-<revision>/ffmpeg-linux``, here the host's ffmpeg): where the
  image keeps Playwright's own build.

The worker signs as the pool's task role and the embedded AWS checks each of its calls
(and those it makes as the job role it assumes per tenant) against the template's policies
for that role (``devstack.iam``; the principals come from ``iam-synth.json``, written beside
the template by ``scripts/synth_check.py``): a call the template does not allow fails here.

Then it submits a job (goto a page on 127.0.0.1, extract, screenshot, recorded on video),
waits for ``succeeded``, checks the screenshot and the video in S3, runs the container
health check in the same sandbox, and stops the worker with SIGTERM (it must drain and exit
0). Exit 0 only if all of that held and IAM refused nothing. Run as root (bwrap mounts, then
drops to the user).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "scripts"))

from sandbox_seccomp import no_user_namespaces  # noqa: E402

from devstack.tenant_role import create_job_role  # noqa: E402

DOCKERFILE = REPO_ROOT / "browser_task" / "Dockerfile"
# The smoke run's resources are named apart from a local stack's.
SMOKE_PREFIX = "smoke-"
# Any non-root uid will do: the image's user has no fixed uid (see the Dockerfile).
WORKER_UID = 1001
# Names in the task definition that point at AWS resources: replaced by the local ones.
RESOURCE_ENV = (
    "PAGEFLEET_JOBS_TABLE",
    "PAGEFLEET_TENANTS_TABLE",
    "PAGEFLEET_ARTIFACTS_BUCKET",
    "PAGEFLEET_QUEUE_URLS",
    "PAGEFLEET_USAGE_TABLE",
    "PAGEFLEET_JOB_ROLE_ARN",
    "PAGEFLEET_LIVE_ENDPOINT",
)


from smoke_checks import check_iam, check_job  # noqa: E402
from smoke_local import PAGE, embedded_aws, test_page  # noqa: E402
from smoke_specs import (  # noqa: E402
    ImageSpec,
    SmokeFailed,
    TaskSpec,
    fargate_volume,
    image_spec,
    task_spec,
)

__all__ = [
    "PAGE",
    "ImageSpec",
    "SmokeFailed",
    "TaskSpec",
    "embedded_aws",
    "fargate_volume",
    "image_spec",
    "main",
    "test_page",
]


def worker_env(task: TaskSpec, image: ImageSpec, aws: dict[str, str], local: Any) -> dict[str, str]:
    import boto3

    env = {k: v for k, v in image.env.items() if not k.startswith("UV_")}
    # The image's paths, mapped to this checkout.
    env["PATH"] = f"{REPO_ROOT / '.venv' / 'bin'}:/usr/bin:/bin"
    env["PYTHONPATH"] = str(REPO_ROOT)
    replaced = {
        "PAGEFLEET_JOBS_TABLE": local.jobs_table,
        "PAGEFLEET_TENANTS_TABLE": local.tenants_table,
        "PAGEFLEET_ARTIFACTS_BUCKET": local.artifacts_bucket,
        "PAGEFLEET_QUEUE_URLS": json.dumps(local.queue_urls),
        "PAGEFLEET_USAGE_TABLE": local.usage_table,
        # The job role the worker assumes per tenant, on the embedded AWS.
        "PAGEFLEET_JOB_ROLE_ARN": create_job_role(boto3.client("iam"), prefix=SMOKE_PREFIX),
        # The WebSocket stage's @connections endpoint: nobody watches the smoke job, so the
        # worker posts no frame; the embedded AWS stands in for the stage's URL.
        "PAGEFLEET_LIVE_ENDPOINT": f"{aws['AWS_ENDPOINT_URL']}/live",
    }
    for name, value in task.env.items():
        if name in replaced:
            env[name] = replaced[name]
        elif isinstance(value, str):
            env[name] = value
        else:
            raise SmokeFailed(f"{name} is not a plain value in the task definition: {value}")
    missing = set(RESOURCE_ENV) - set(task.env)
    if missing:
        raise SmokeFailed(f"the task definition does not set {sorted(missing)}")
    env.update(aws)
    env["PAGEFLEET_ALLOW_LOOPBACK"] = "true"
    if "PLAYWRIGHT_BROWSERS_PATH" in image.env:
        env["PLAYWRIGHT_BROWSERS_PATH"] = str(image_registry())
    return env


def image_registry() -> Path:
    """The image's Playwright registry, as far as the worker uses it beside Chromium: the
    driver's ffmpeg at the path it looks for, here linked to the host's ffmpeg."""
    from browser_task.browser.video import ffmpeg_path, ffmpeg_revision

    host = shutil.which("ffmpeg") or str(ffmpeg_path())
    if not os.access(host, os.X_OK):
        raise SmokeFailed("video recording needs ffmpeg on this machine: make ffmpeg")
    root = REPO_ROOT / "cdk.out" / "worker-smoke" / "ms-playwright"
    linked = root / f"ffmpeg-{ffmpeg_revision()}" / "ffmpeg-linux"
    linked.parent.mkdir(parents=True, exist_ok=True)
    for directory in (REPO_ROOT / "cdk.out", *reversed(linked.parents[:4])):
        directory.chmod(0o755)  # the worker's user walks down to it
    linked.unlink(missing_ok=True)
    linked.symlink_to(os.path.realpath(host))
    return root


def bwrap_argv(
    task: TaskSpec, image: ImageSpec, mounts: dict[str, Path], env: dict[str, str], seccomp_fd: int
) -> list[str]:
    if not task.read_only_root:
        raise SmokeFailed("the task definition does not make the root filesystem read-only")
    if task.dropped != ["ALL"]:
        raise SmokeFailed(f"the task definition drops {task.dropped}, not ALL capabilities")
    argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # A mount point the host lacks (/home/pwuser) is made on a tmpfs over its parent, which
    # is then made read-only again.
    missing = {str(Path(p).parent) for p in mounts if not Path(p).exists()}
    for parent in sorted(missing):
        argv += ["--perms", "0755", "--tmpfs", parent]
    for path, source in mounts.items():
        argv += ["--bind", str(source), path]
    if any(Path(path) == REPO_ROOT or Path(path) in REPO_ROOT.parents for path in mounts):
        # This checkout (its venv is the image's /app) lies under a task volume, e.g. a
        # clone in /tmp: show it again, read-only, over the volume's empty directory.
        argv += ["--ro-bind", str(REPO_ROOT), str(REPO_ROOT)]
    for parent in sorted(missing):
        argv += ["--remount-ro", parent]
    argv += interpreter_mounts()
    argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
    argv += ["--new-session", "--chdir", str(REPO_ROOT), "--clearenv"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    argv += ["--seccomp", str(seccomp_fd)]
    # Drop to the image's user: every capability and the bounding set go with it.
    argv += ["--", "setpriv", f"--reuid={WORKER_UID}", f"--regid={WORKER_UID}"]
    argv += ["--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    return argv


def interpreter_mounts() -> list[str]:
    """Make this venv's base interpreter reachable by the worker's user, read-only.

    In the image Python sits in /usr and /app/.venv, readable by anyone; here the venv's
    interpreter may live under a directory only root can enter (e.g. pyenv in /root). Only
    the interpreter's own tree is shown there, on a read-only tmpfs; nothing else of it.
    """
    prefix = Path(sys.base_prefix).resolve()
    closed = next(
        (p for p in reversed(prefix.parents) if p != Path("/") and not p.stat().st_mode & 0o001),
        None,
    )
    if closed is None:
        return []
    argv = ["--perms", "0755", "--tmpfs", str(closed)]
    for directory in reversed(prefix.parents):
        if directory in closed.parents or directory == closed or directory == Path("/"):
            continue
        argv += ["--perms", "0755", "--dir", str(directory)]  # bwrap's default is 0700
    return [*argv, "--ro-bind", str(prefix), str(prefix), "--remount-ro", str(closed)]


def prepare_mounts(task: TaskSpec, image: ImageSpec, root: Path) -> dict[str, Path]:
    mounts = {}
    for path in task.writable:
        owner, mode = fargate_volume(path, image)
        source = root / path.strip("/").replace("/", "_")
        source.mkdir()
        uid = WORKER_UID if owner == image.user else 0
        os.chown(source, uid, uid)
        source.chmod(mode)
        mounts[path] = source
    return mounts


def run_smoke(
    template_path: Path,
    pool: str,
    timeout_s: float,
    keep: Path | None,
    iam_report: Path | None = None,
    iam_synth: Path | None = None,
) -> None:
    import boto3

    from devstack.constants import aws_env
    from devstack.iam.local import LocalIam, summary
    from devstack.provision import create_all
    from pagefleet.runtime import RUNTIME
    from pagefleet.specs.settings import CoreSettings

    if os.geteuid() != 0:
        raise SmokeFailed("run as root: bwrap mounts the volumes, then drops to the user")
    task = task_spec(json.loads(template_path.read_text()), pool)
    image = image_spec(DOCKERFILE.read_text())
    if image.user == "root":
        raise SmokeFailed("the image runs as root")
    print(f"task definition: read-only root, drop {task.dropped}, writable {task.writable}")
    print(f"image: USER {image.user}, VOLUME {image.volumes}")

    work = Path(tempfile.mkdtemp(prefix="pagefleet-smoke-"))
    mounts = prepare_mounts(task, image, work)
    for path, source in mounts.items():
        st = source.stat()
        print(f"  {path}: empty, uid {st.st_uid}, mode {oct(st.st_mode & 0o7777)}")
    worker_log = work / "worker.log"
    iam_synth = iam_synth or template_path.parent / "iam-synth.json"
    if not iam_synth.exists():
        raise SmokeFailed(f"{iam_synth} is missing: synthesize with scripts/synth_check.py")
    iam = LocalIam(iam_synth, prefix=SMOKE_PREFIX)
    try:
        with contextlib.ExitStack() as stack:
            endpoint = stack.enter_context(embedded_aws(work / "embedded-aws.log", iam.moto_env()))
            page = stack.enter_context(test_page())
            aws = aws_env(endpoint)
            saved_env = dict(os.environ)
            os.environ.update(aws)
            RUNTIME.reset()
            stack.callback(_restore_env, saved_env)
            local = create_all(
                boto3.client("dynamodb"),
                boto3.client("sqs"),
                boto3.client("s3"),
                prefix=SMOKE_PREFIX,
            )
            # The worker signs as its pool's task role; the smoke run itself as the operator.
            env = {**worker_env(task, image, aws, local), **iam.env(f"worker/{pool}")}
            settings = CoreSettings(
                jobs_table=local.jobs_table,
                tenants_table=local.tenants_table,
                artifacts_bucket=local.artifacts_bucket,
                queue_urls=local.queue_urls,
            )
            services = RUNTIME.job_services(settings)
            seccomp_fd = _seccomp_fd()
            argv = bwrap_argv(task, image, mounts, env, seccomp_fd)
            with worker_log.open("wb") as out:
                worker = subprocess.Popen(
                    [*argv, "python", "-m", "browser_task"],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    pass_fds=(seccomp_fd,),
                )
            os.close(seccomp_fd)
            try:
                check_job(services, local, page, pool, timeout_s, worker)
                _check_health(task, image, mounts, env)
            finally:
                if worker.poll() is None:
                    stop_worker(worker)
                    try:
                        worker.wait(60)
                    except subprocess.TimeoutExpired:
                        worker.kill()
                        raise SmokeFailed(
                            "the worker did not stop within 60 s of SIGTERM"
                        ) from None
            if worker.returncode != 0:
                raise SmokeFailed(f"the worker exited {worker.returncode} after SIGTERM")
            print("worker drained and exited 0 on SIGTERM")
            check_iam(iam.report(endpoint), iam_report, summary)
    except BaseException:
        if worker_log.exists():
            print(
                f"--- worker log (last lines) ---\n{worker_log.read_text()[-4000:]}",
                file=sys.stderr,
            )
        raise
    finally:
        if keep is not None:
            with contextlib.suppress(shutil.Error):  # sockets and dangling links
                shutil.copytree(work, keep, symlinks=True, dirs_exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)


def _check_health(
    task: TaskSpec, image: ImageSpec, mounts: dict[str, Path], env: dict[str, str]
) -> None:
    """The container health check, run in the same sandbox as the worker."""
    health_fd = _seccomp_fd()
    health = subprocess.run(
        [*bwrap_argv(task, image, mounts, env, health_fd), *task.health_check[1:]],
        capture_output=True,
        text=True,
        pass_fds=(health_fd,),
        check=False,
    )
    os.close(health_fd)
    if task.health_check[:1] != ["CMD"] or health.returncode != 0:
        raise SmokeFailed(f"health check {task.health_check} failed: {health.stderr.strip()}")
    print(f"health check {task.health_check[1:]}: healthy")


def _restore_env(saved: dict[str, str]) -> None:
    from pagefleet.runtime import RUNTIME

    os.environ.clear()
    os.environ.update(saved)
    RUNTIME.reset()


def stop_worker(sandbox: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the worker itself, as ECS's init process forwards a task stop to it
    (signalling bwrap would only end the sandbox)."""
    import psutil

    for child in psutil.Process(sandbox.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.name() != "bwrap" and child.cmdline()[-2:] == ["-m", "browser_task"]:
                child.send_signal(signal.SIGTERM)
                return
    sandbox.send_signal(signal.SIGTERM)


def _seccomp_fd() -> int:
    """A fresh readable fd holding the filter (bwrap reads it to the end)."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, no_user_namespaces())
    os.close(write_fd)
    return read_fd


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", type=Path, required=True, help="a synthesized template")
    parser.add_argument("--pool", default="standard")
    parser.add_argument("--timeout", type=float, default=180, help="seconds for the job")
    parser.add_argument("--keep", type=Path, help="copy the volumes and logs here")
    parser.add_argument("--iam-report", type=Path, help="write the IAM check's report here")
    parser.add_argument(
        "--iam-synth", type=Path, help="the principals (default: iam-synth.json beside it)"
    )
    args = parser.parse_args(argv)
    if shutil.which("bwrap") is None:
        print("worker smoke: needs bubblewrap (apt-get install -y bubblewrap)", file=sys.stderr)
        return 2
    try:
        run_smoke(
            args.template, args.pool, args.timeout, args.keep, args.iam_report, args.iam_synth
        )
    except SmokeFailed as exc:
        print(f"worker smoke FAILED: {exc}", file=sys.stderr)
        return 1
    print("worker smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
