"""Lambda factory: every function gets the same runtime, architecture, logging and tracing.

Each function gets its own role (only what it is granted afterwards, plus writing to its
own log group), its own log group with the stage's retention, JSON logs, X-Ray tracing and
an explicit retry policy for asynchronous invocations.

Code: one asset with ``pagefleet/`` and ``functions/`` only. Dependencies: one layer built
without Docker (``uv`` installs the locked runtime dependencies as manylinux wheels for the
Lambda platform). Both ship bytecode compiled by the runtime's Python (``/var/task`` and
``/opt`` are read-only: without it every cold start compiles every module it imports),
hash-based and unchecked, so Lambda uses it whatever the source files' times in the zip.
Offline synth and the tests skip the install and the compile (context
``pagefleet:bundleDependencies=false``) and the layer holds only a marker file; such an
assembly must not be deployed, so the synth fails unless ``pagefleet:inspectOnly=true``
says it is for inspection (then it warns).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import jsii
from aws_cdk import (
    Annotations,
    AssetHashType,
    BundlingOptions,
    DockerImage,
    Duration,
    ILocalBundling,
)
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct, IValidation
from pydantic_settings import BaseSettings

from infra.nag import acknowledge
from infra.runtime_env import settings_env
from pagefleet.specs.metrics_names import NAMESPACE_ENV, stage_namespace
from pagefleet.specs.resources import FUNCTION_ENV

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
# The alias API Gateway invokes on SnapStart functions: their latest published version.
LIVE_ALIAS = "live"
# Wheels for the Lambda platform above.
_PIP_PLATFORM = "aarch64-manylinux2014"
_PIP_PYTHON = "3.14"

# Only the code the functions import goes into the asset.
CODE_EXCLUDE = [
    "*",
    ".*",
    "!pagefleet",
    "!pagefleet/**",
    "!functions",
    "!functions/**",
    "**/__pycache__",
    "**/*.pyc",
]
OFFLINE_MARKER = "DEPENDENCIES_NOT_BUNDLED"
UNBUNDLED_ERROR = (
    "Lambda dependencies were not bundled (pagefleet:bundleDependencies=false): such an "
    "assembly cannot run. Deploy with bundling on (cdk.json's default), or add "
    "-c pagefleet:inspectOnly=true to synthesize it for inspection only."
)
# The code asset's content (the bundled code is copied from these).
CODE_DIRS = ("pagefleet", "functions")


def runtime_python() -> list[str]:
    """A Python of the Lambda runtime's version, to compile bytecode with (uv provides one,
    downloading it if needed, when the deployer bundles: network is needed then anyway)."""
    uv = shutil.which("uv")
    if uv is None:
        raise RuntimeError("bundling the Lambda code needs `uv` on PATH")
    return [uv, "run", "--no-project", "--python", _PIP_PYTHON, "python"]


def compile_bytecode(root: Path, python: list[str], shown_as: str) -> None:
    """Every module under ``root`` compiled by ``python`` into ``__pycache__``: hash-based and
    unchecked, so the interpreter loads it without comparing the source's mtime; tracebacks
    name the files where Lambda mounts them (``shown_as``), not the build directory."""
    subprocess.run(
        [*python, "-m", "compileall", "-q", "-j", "0",
         "--invalidation-mode", "unchecked-hash", "-s", str(root), "-p", shown_as,
         str(root)],
        check=True,
    )  # fmt: skip


def service_name(function: str) -> str:
    """Powertools' ``service`` (a dimension of every metric the function emits)."""
    return f"pagefleet-{function.replace('_', '-')}"


def sqs_visibility_for(timeout_s: int, batching_window_s: int = 0) -> int:
    """The visibility timeout a queue needs for a Lambda consumer: AWS's rule of six times
    the function timeout plus the batching window, so a batch being retried after a
    throttle or a timeout is not delivered to a second invocation meanwhile."""
    return 6 * timeout_s + batching_window_s


# What the layer's content depends on besides the bundling mode.
LAYER_INPUTS = ("pyproject.toml", "uv.lock")


def layer_asset_hash(*, bundled: bool, root: Path = REPO_ROOT) -> str:
    """The dependency layer's asset hash: the lock inputs, the target platform and whether
    the dependencies were installed. CDK's own source hash cannot see the last one (the
    local bundler is a Python object), so an offline assembly's marker-only layer would
    otherwise be published under the same hash as the real layer."""
    digest = hashlib.sha256()
    mode = f"uv:{_PIP_PLATFORM}:{_PIP_PYTHON}" if bundled else f"offline:{OFFLINE_MARKER}"
    digest.update(mode.encode())
    for name in LAYER_INPUTS:
        digest.update(b"\0" + name.encode() + b"\0" + (root / name).read_bytes())
    return digest.hexdigest()


@jsii.implements(ILocalBundling)
class _UvLayerBundling:
    """Installs the locked runtime dependencies (no dev, no extras) into ``python/``."""

    def __init__(self, *, install: bool, python: list[str] | None = None) -> None:
        self._install = install
        self._python = python

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        target = Path(output_dir) / "python"
        target.mkdir(parents=True, exist_ok=True)
        if not self._install:
            (target / OFFLINE_MARKER).write_text(
                "Synthesized with pagefleet:bundleDependencies=false; do not deploy.\n"
            )
            return True
        uv = shutil.which("uv")
        if uv is None:
            raise RuntimeError("bundling the Lambda dependencies needs `uv` on PATH")
        with tempfile.TemporaryDirectory() as tmp:
            requirements = Path(tmp) / "requirements.txt"
            subprocess.run(
                # The mcp extra: the API's remote MCP route (POST /v1/mcp) runs the SDK.
                [uv, "export", "--frozen", "--no-dev", "--extra", "mcp", "--no-emit-project",
                 "--no-hashes", "--project", str(REPO_ROOT), "--output-file", str(requirements)],
                check=True,
            )  # fmt: skip
            subprocess.run(
                [uv, "pip", "install", "--requirements", str(requirements),
                 "--target", str(target), "--python-platform", _PIP_PLATFORM,
                 "--python-version", _PIP_PYTHON, "--only-binary", ":all:",
                 "--no-cache"],
                check=True,
            )  # fmt: skip
        compile_bytecode(target, self._python or runtime_python(), "/opt/python")
        return True


@jsii.implements(ILocalBundling)
class _CompiledCodeBundling:
    """The functions' code as the asset holds it, with its bytecode."""

    def __init__(self, *, root: Path = REPO_ROOT, python: list[str] | None = None) -> None:
        self._root = root
        self._python = python

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        out = Path(output_dir)
        for name in CODE_DIRS:
            shutil.copytree(
                self._root / name,
                out / name,
                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                dirs_exist_ok=True,
            )
        compile_bytecode(out, self._python or runtime_python(), "/var/task")
        return True


def code_asset(*, compiled: bool) -> lambda_.AssetCode:
    """The functions' code: compiled when the assembly is for deployment (its hash is then
    the output's, so the uncompiled inspection asset never stands in for it)."""
    if not compiled:
        return lambda_.Code.from_asset(str(REPO_ROOT), exclude=CODE_EXCLUDE)
    return lambda_.Code.from_asset(
        str(REPO_ROOT),
        exclude=CODE_EXCLUDE,
        asset_hash_type=AssetHashType.OUTPUT,
        bundling=BundlingOptions(
            image=DockerImage.from_registry("unused-local-bundling-only"),
            local=_CompiledCodeBundling(),
        ),
    )


@jsii.implements(IValidation)
class _ReservedConcurrencyNames:
    """A reservation for a function the stack does not have is a typo, not a no-op."""

    def __init__(self, factory: LambdaFactory) -> None:
        self._factory = factory

    def validate(self) -> list[str]:
        unknown = sorted(set(self._factory.reserved) - set(self._factory.functions))
        return [f"reserved_concurrency names unknown functions {unknown}"] if unknown else []


@jsii.implements(IValidation)
class _RefuseUnbundled:
    """An assembly whose layer is a marker file must fail at synth unless it says it is for
    inspection: a warning is scrolled past, and the deployed functions would not import."""

    def validate(self) -> list[str]:
        return [UNBUNDLED_ERROR]


class LambdaFactory(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        log_retention: logs.RetentionDays,
        bundle_dependencies: bool,
        reserved_concurrency: dict[str, int],
        inspect_only: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self._retention = log_retention
        self._stage = stage
        self.reserved = dict(reserved_concurrency)
        self.code = code_asset(compiled=bundle_dependencies)
        self.dependencies = lambda_.LayerVersion(
            self,
            "Dependencies",
            description="pagefleet runtime dependencies (uv.lock, no dev)",
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            code=lambda_.Code.from_asset(
                str(REPO_ROOT),
                exclude=["*", *(f"!{name}" for name in LAYER_INPUTS)],
                asset_hash_type=AssetHashType.CUSTOM,
                asset_hash=layer_asset_hash(bundled=bundle_dependencies),
                bundling=BundlingOptions(
                    # Never used: local bundling always succeeds or raises.
                    image=DockerImage.from_registry("unused-local-bundling-only"),
                    local=_UvLayerBundling(install=bundle_dependencies),
                ),
            ),
        )
        if not bundle_dependencies and not inspect_only:
            self.node.add_validation(_RefuseUnbundled())
        elif not bundle_dependencies:
            Annotations.of(self).add_warning_v2(
                "pagefleet:unbundled",
                "Lambda dependencies were not bundled (pagefleet:bundleDependencies=false): "
                "this assembly is for inspection and tests, do not deploy it.",
            )
        self.functions: dict[str, lambda_.Function] = {}
        self.aliases: dict[str, lambda_.Alias] = {}
        self.node.add_validation(_ReservedConcurrencyNames(self))

    def function(
        self,
        name: str,
        *,
        settings_cls: type[BaseSettings],
        env: dict[str, str],
        description: str,
        timeout_seconds: int = 10,
        memory_mib: int = 512,
        retry_attempts: int = 0,
        on_failure: lambda_.IDestination | None = None,
        snap_start: bool = False,
    ) -> lambda_.Function:
        """``functions/<name>/handler.py:handler`` with environment from ``settings_cls``.

        ``snap_start``: Lambda snapshots the initialised environment of each published
        version and resumes new environments from it (the handler registers its restore
        hooks, ``functions/snapstart.py``); callers must invoke ``alias(name)``, as
        ``$LATEST`` never runs from a snapshot.
        """
        node_id = "".join(part.capitalize() for part in name.split("_"))
        log_group = logs.LogGroup(self, f"{node_id}Logs", retention=self._retention)
        role = iam.Role(
            self,
            f"{node_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"pagefleet {name} function",
        )
        log_group.grant_write(role)
        acknowledge(
            role,
            "IAM5[Resource::*]",
            "Active tracing: X-Ray PutTraceSegments/PutTelemetryRecords have no resource-level "
            "permissions.",
        )
        function = lambda_.Function(
            self,
            node_id,
            description=description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            code=self.code,
            handler=f"functions.{name}.handler.handler",
            layers=[self.dependencies],
            role=role,
            timeout=Duration.seconds(timeout_seconds),
            memory_size=memory_mib,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            tracing=lambda_.Tracing.ACTIVE,
            retry_attempts=retry_attempts,
            on_failure=on_failure,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if snap_start else None,
            reserved_concurrent_executions=self.reserved.get(name),
            environment={
                **settings_env(settings_cls, **env),
                **FUNCTION_ENV,
                "POWERTOOLS_SERVICE_NAME": service_name(name),
                NAMESPACE_ENV: stage_namespace(self._stage),
            },
        )
        self.functions[name] = function
        if snap_start:
            # current_version publishes a version whenever the code or configuration
            # changes; the alias follows it, so callers always reach a snapshot.
            self.aliases[name] = lambda_.Alias(
                self, f"{node_id}Live", alias_name=LIVE_ALIAS, version=function.current_version
            )
        return function

    def alias(self, name: str) -> lambda_.Alias:
        """The ``live`` alias of a SnapStart function (its published version)."""
        return self.aliases[name]
