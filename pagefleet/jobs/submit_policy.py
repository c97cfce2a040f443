"""What a tenant's job may ask for, checked where every job is made (``planning.plan_job``).

A single job, a batch's items, a schedule's creation and change, a schedule's run (by hand or
by the Scheduler), a monitor (a schedule with expectations) and a session saved as a workflow
then run: each becomes a job through the planning path, so each refuses the same things the
same way (422 naming the field). Two rules:

- the completion webhook's address passes the egress policy (no private, link-local or
  metadata address: SSRF), as the sender checks again when it posts;
- an ``evaluate`` step (arbitrary JavaScript in the page) only for a tenant whose limits allow
  it, as the worker checks again when it runs (a limit may change between the two);
- a job's ``requires`` routes it to a pool that has them, or refuses it naming every pool
  and what each lacks (``pagefleet.specs.pools``); a pool it names must be one of the
  deployment's, and either must be one its tenant's limits allow (``pools``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pagefleet.errors import InvalidField
from pagefleet.jobs.models import JobRequest
from pagefleet.jobs.spend import CostCap
from pagefleet.specs.pools import NoPoolFits, PoolOffer, Requirements, route
from pagefleet.specs.traces import DEFAULT_TRACE, TraceMode
from pagefleet.targets import egress_policy
from pagefleet.targets.egress_policy import EgressPolicy, EgressRefused, SyncResolver, check_url
from pagefleet.workflow import Evaluate, Step, iter_steps

WEBHOOK_FIELD = "notify.webhook"
EVALUATE_REFUSED = (
    "evaluate is not allowed for this tenant (policy allow_evaluate is off); ask an "
    "administrator to enable it, or remove the evaluate step"
)


def _nobody(tenant_id: str) -> bool:
    return False


def _stage_default_trace(tenant_id: str) -> TraceMode:
    return DEFAULT_TRACE


def _every_pool(tenant_id: str) -> frozenset[str] | None:
    return None


def _system_lookup(host: str) -> list[str]:
    # Looked up at call time, so tests replace the system resolver in one place.
    return egress_policy.system_lookup(host)


@dataclass(frozen=True)
class SubmitPolicy:
    """The submission rules of one deployment, built once with its job services.

    ``allow_loopback``: webhooks may target 127/8 and ::1 (local development only).
    ``resolver``: how a webhook's host is looked up (None: the system's, at call time).
    ``evaluate_allowed``: whether a tenant may run ``evaluate`` steps (the default: nobody).
    ``trace_default``: the trace mode of a tenant's jobs that do not set ``options.trace``
    (its limits', cached as admission reads them: no request a job).
    ``pools``: what each worker pool offers, where a job's ``requires`` routes it.
    ``pools_allowed``: the pools a tenant's jobs may run in (its limits'; None: every pool).
    ``pool_names``: the deployment's pools (``CoreSettings.pool_names``; empty: any name).
    ``price_cap``: a ``max_cost_usd`` as the browser-seconds it buys on this deployment's
    worker shape (``pagefleet.tenancy.spend.job_cost_cap``; None: no job may set one).
    """

    allow_loopback: bool = False
    resolver: SyncResolver | None = None
    evaluate_allowed: Callable[[str], bool] = _nobody
    trace_default: Callable[[str], TraceMode] = _stage_default_trace
    pools: tuple[PoolOffer, ...] = ()
    pools_allowed: Callable[[str], frozenset[str] | None] = _every_pool
    pool_names: tuple[str, ...] = ()
    price_cap: Callable[[float], CostCap] | None = None

    def with_cost_cap(self, request: JobRequest) -> JobRequest:
        """``request`` with its ``max_cost_usd`` as browser-seconds (``InvalidField`` when it
        does not cover a first attempt)."""
        if request.max_cost_usd is None:  # a cap comes from max_cost_usd only
            return (
                request
                if request.cost_cap is None
                else request.model_copy(update={"cost_cap": None})
            )
        if self.price_cap is None:
            raise InvalidField(
                "this deployment prices no jobs: max_cost_usd cannot be held; leave it out",
                field="max_cost_usd",
            )
        return request.model_copy(update={"cost_cap": self.price_cap(request.max_cost_usd)})

    def with_trace(self, tenant_id: str, request: JobRequest) -> JobRequest:
        """``request`` with its trace mode settled: the job's own, else its tenant's."""
        if request.options.trace is not None:
            return request
        options = request.options.model_copy(update={"trace": self.trace_default(tenant_id)})
        return request.model_copy(update={"options": options})

    def pool_for(
        self, tenant_id: str, requires: Requirements | None, named: str | None, default: str
    ) -> str:
        """The pool a job runs in: ``named`` (the one it asked for, which must exist, be
        allowed and have what it ``requires``), else the smallest allowed pool with what it
        requires, else ``default`` when its tenant may use it (else its smallest allowed
        pool). ``InvalidField`` on ``pool`` or ``requires`` naming the pools it may use."""
        names = self.pool_names or tuple(offer.name for offer in self.pools)
        if named is not None and names and named not in names:
            raise InvalidField(
                f"unknown pool {named!r}; this deployment's pools: {', '.join(names)}",
                field="pool",
            )
        allowed = self.pools_allowed(tenant_id)
        if allowed is not None and named is not None and named not in allowed:
            raise InvalidField(
                f"pool {named!r} is not allowed for this tenant; its pools: "
                f"{', '.join(sorted(allowed))}",
                field="pool",
            )
        if requires is None and (named is not None or allowed is None or default in allowed):
            return named or default
        if not self.pools:
            raise InvalidField(
                "this deployment publishes no pool capabilities to route by; name a pool",
                field="requires" if requires is not None else "pool",
            )
        try:
            return route(requires or Requirements(), self.pools, named=named, allowed=allowed)
        except NoPoolFits as none:
            field = "requires" if requires is not None else "pool"
            if allowed is not None:
                raise InvalidField(
                    f"{none} (this tenant's pools: {', '.join(sorted(allowed))})", field=field
                ) from None
            raise InvalidField(str(none), field=field) from None

    def check_webhook(self, url: str, *, field: str = WEBHOOK_FIELD) -> None:
        """Raise ``InvalidField`` on ``field`` when pagefleet may not POST to ``url``."""
        resolve = self.resolver or _system_lookup
        try:
            check_url(url, EgressPolicy(allow_loopback=self.allow_loopback), resolve)
        except EgressRefused as refused:
            raise InvalidField(f"webhook URL not allowed: {refused.reason}", field=field) from None

    def check_steps(
        self, tenant_id: str, steps: list[Step], *, field: str = "steps", named: bool = False
    ) -> None:
        """Raise ``InvalidField`` at the first ``evaluate`` step the tenant may not run.

        ``named``: the steps are a named workflow's, so the field is the ``workflow`` itself
        and the message says which of its steps.
        """
        first = next((path for path, step in iter_steps(steps) if isinstance(step, Evaluate)), None)
        if first is None or self.evaluate_allowed(tenant_id):
            return
        where = _step_field(field, first)
        if named:
            raise InvalidField(f"{EVALUATE_REFUSED} (the workflow's {where})", field="workflow")
        raise InvalidField(EVALUATE_REFUSED, field=where)


STRICT = SubmitPolicy()
"""The default: no loopback webhooks, the system's resolver, no tenant may evaluate."""


def _step_field(field: str, path: str) -> str:
    """``steps[3]`` or ``steps[3].steps[1]`` from ``iter_steps``' ``3`` / ``3.steps[1]``."""
    top, _, rest = path.partition(".")
    return f"{field}[{top}]" + (f".{rest}" if rest else "")
