"""Issue 35's operator fixes that a stage's settings decide, checked without a synth."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App

from infra.deploy_file import load_config
from pagefleet.pricing import Usage, Worker, cost

pytestmark = pytest.mark.infra


def test_spot_on_graviton_is_refused_at_synth_saying_what_to_choose() -> None:
    """AWS: "Linux tasks with the ARM64 architecture don't support the Fargate Spot capacity
    provider": the service would never place a task."""
    spot = json.dumps({"pools": {"standard": {"spot": True}}})
    with pytest.raises(ValueError, match="Fargate Spot") as refused:
        load_config(App(context={"pagefleet:stage": "prod", "pagefleet:overrides": spot}).node)
    says = str(refused.value)
    assert "['standard']" in says
    assert 'worker_architecture "x86_64"' in says and '"spot": false' in says
    x86 = json.dumps({"worker_architecture": "x86_64", "pools": {"standard": {"spot": True}}})
    config = load_config(App(context={"pagefleet:stage": "prod", "pagefleet:overrides": x86}).node)
    assert config.pool("standard").spot and config.worker_architecture == "x86_64"


def test_spot_is_judged_per_pool_by_the_architecture_it_runs_on() -> None:
    """A Spot pool may run x86_64 beside Graviton pools; a pool that runs arm64 (its own
    setting over an x86_64 stage) may not use Spot."""
    mixed = json.dumps({"pools": {"heavy": {"spot": True, "architecture": "x86_64"}}})
    config = load_config(
        App(context={"pagefleet:stage": "prod", "pagefleet:overrides": mixed}).node
    )
    assert config.architecture_of("heavy") == "x86_64" and config.pool("heavy").spot
    assert config.architecture_of("standard") == "arm64"  # the stage's, at Graviton's price
    arm_pool = json.dumps(
        {
            "worker_architecture": "x86_64",
            "pools": {"standard": {"spot": True, "architecture": "arm64"}},
        }
    )
    with pytest.raises(ValueError, match=r"pools \['standard'\] ask for Fargate Spot"):
        load_config(App(context={"pagefleet:stage": "prod", "pagefleet:overrides": arm_pool}).node)


def test_there_is_no_spot_price_for_a_graviton_task() -> None:
    with pytest.raises(ValueError, match="x86_64 tasks only"):
        cost(Usage(browser_seconds=3600), "us-east-1", Worker(architecture="arm64", spot=True))


def test_the_runtimes_emit_into_the_namespace_their_stage_was_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pagefleet.specs import metrics_names as m

    assert m.stage_namespace("dev") != m.stage_namespace("prod")
    monkeypatch.setenv(m.NAMESPACE_ENV, m.stage_namespace("prod"))
    assert m.runtime_namespace() == "pagefleet/prod"
    monkeypatch.delenv(m.NAMESPACE_ENV)
    assert m.runtime_namespace() == m.NAMESPACE  # the local stack's


def _functions_stack(tmp_path, *, inspect_only: bool):  # type: ignore[no-untyped-def]
    from aws_cdk import Stack, aws_logs

    from infra.constructs.lambda_factory import LambdaFactory

    app = App(outdir=str(tmp_path))
    LambdaFactory(
        Stack(app, "s"),
        "F",
        stage="dev",
        log_retention=aws_logs.RetentionDays.ONE_DAY,
        bundle_dependencies=False,
        reserved_concurrency={},
        inspect_only=inspect_only,
    )
    return app


def test_an_unbundled_assembly_fails_synth_unless_it_says_it_is_for_inspection(
    tmp_path,
) -> None:
    """Its layer is a marker file: deployed, no function would import. A warning was all
    that stood in the way."""
    from aws_cdk import cx_api

    with pytest.raises(Exception, match="pagefleet:inspectOnly=true"):
        _functions_stack(tmp_path / "deploy", inspect_only=False).synth()
    assembly = _functions_stack(tmp_path / "inspect", inspect_only=True).synth()
    warnings = [
        str(m.entry.data)
        for m in assembly.get_stack_by_name("s").messages
        if m.level == cx_api.SynthesisMessageLevel.WARNING
    ]
    assert any("do not deploy" in w for w in warnings), warnings
    # The flag arrives as the CLI passes context (a string), and `make synth` passes it.
    assert load_config(App(context={"pagefleet:inspectOnly": "true"}).node).inspect_only
    assert not load_config(App().node).inspect_only
    from infra.app import cli_context

    assert cli_context(["-c", "pagefleet:inspectOnly=true"]) == {"pagefleet:inspectOnly": "true"}
    from infra.deploy_file import REPO_ROOT

    assert "infra.app -c pagefleet:inspectOnly=true" in (REPO_ROOT / "Makefile").read_text()


def _pyc_flags(pyc) -> int:  # type: ignore[no-untyped-def]
    """PEP 552: the header's second word; 0b01 is hash-based, source not checked."""
    return int.from_bytes(pyc.read_bytes()[4:8], "little")


def test_the_functions_code_ships_bytecode_lambda_loads_without_checking_sources(
    tmp_path,
) -> None:
    """/var/task is read-only: without .pyc in the asset every cold start compiles every
    module it imports. Unchecked hash-based .pyc is used whatever the mtimes in the zip."""
    import sys

    from infra.constructs.lambda_factory import _CompiledCodeBundling

    out = tmp_path / "asset"
    out.mkdir()
    _CompiledCodeBundling(python=[sys.executable]).try_bundle(str(out), image=None)  # type: ignore[arg-type]
    tag = sys.implementation.cache_tag
    handler = out / "functions" / "api" / "__pycache__" / f"handler.{tag}.pyc"
    assert (out / "functions" / "api" / "handler.py").is_file()
    assert _pyc_flags(handler) == 0b01
    import marshal

    code = marshal.loads(handler.read_bytes()[16:])  # noqa: S302 (our own build output)
    assert code.co_filename == "/var/task/functions/api/handler.py"
    core = sorted((out / "pagefleet").rglob("*.py"))
    compiled = {
        p.parent.parent / (p.name.split(".")[0] + ".py") for p in (out / "pagefleet").rglob("*.pyc")
    }
    assert core and set(core) <= compiled, sorted(set(core) - compiled)[:5]


def test_the_dependency_layer_is_compiled_by_the_runtimes_python(tmp_path, monkeypatch) -> None:
    """The layer's wheels are installed for Python 3.14 on arm64; their bytecode must be
    3.14's too (a .pyc of another version is ignored), so uv provides that interpreter."""
    import subprocess

    from infra.constructs import lambda_factory as factory

    ran: list[list[str]] = []
    monkeypatch.setattr(factory.shutil, "which", lambda name: f"/bin/{name}")
    monkeypatch.setattr(subprocess, "run", lambda cmd, **_: ran.append([str(c) for c in cmd]))
    factory._UvLayerBundling(install=True).try_bundle(str(tmp_path), image=None)  # type: ignore[arg-type]
    install, compile_ = ran[-2], ran[-1]
    assert "install" in install and "--python-version" in install
    assert compile_[:5] == ["/bin/uv", "run", "--no-project", "--python", "3.14"]
    assert compile_[5:8] == ["python", "-m", "compileall"]
    assert "unchecked-hash" in compile_ and compile_[-1] == str(tmp_path / "python")
    assert compile_[compile_.index("-p") + 1] == "/opt/python"  # where Lambda mounts a layer


def test_a_stage_that_leaves_image_scanning_to_its_owner_sets_none() -> None:
    """ECR's registry scanning configuration is one per account and region: a stage whose
    account scans already (another stage, Amazon Inspector's enhanced scanning) must not
    replace it."""
    from aws_cdk import App, Stack
    from aws_cdk.assertions import Template

    from infra.config import STAGES
    from infra.constructs.image_scanning import ImageScanning

    counts = {}
    for owner in ("stack", "existing"):
        stack = Stack(App(), f"Scan{owner.title()}")
        config = STAGES["dev"].model_copy(update={"image_scanning": owner})
        ImageScanning(stack, "ImageScanning", config=config)
        counts[owner] = len(
            Template.from_stack(stack).find_resources("AWS::ECR::RegistryScanningConfiguration")
        )
    assert counts == {"stack": 1, "existing": 0}


def test_the_local_pools_offer_what_the_dev_stage_pools_offer() -> None:
    """A job routed by ``requires`` on the local stack goes where it would on dev."""
    from devstack.local_settings import LOCAL_POOLS
    from infra.config import STAGES
    from pagefleet.specs.pools import PoolOffer

    # As the functions read it (defaults left out of the environment: it holds 4 KB).
    dev = [PoolOffer.model_validate(o) for o in json.loads(STAGES["dev"].pool_offers())]
    assert list(LOCAL_POOLS) == dev
    prod = {o["name"]: o for o in json.loads(STAGES["prod"].pool_offers())}
    assert prod["standard"]["egress"] == "nat" and prod["heavy"]["memory_mib"] == 8192
