"""Every ``error.kind`` a job can end with: when it happens and what to do about it.

The reference page (docs/reference/errors.md) is generated from this table; whether a kind
is retried is read from the code that raises it (``FailJob``: never; ``RetryJob``: while
``max_attempts`` allows, after exponential backoff with full jitter; a ``JobError`` by its
``retryable``). tests/unit/test_docs_reference.py fails when the code raises a kind this
table lacks, or the table names one the code no longer raises.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ErrorKind:
    kind: str
    when: str
    todo: str


ERROR_KINDS: tuple[ErrorKind, ...] = (
    ErrorKind(
        "step_failed",
        "a step failed: an element never appeared, a click or fill timed out, a target 4xx",
        "read `error.step` and `error.timeout`; fix the selector or the wait, or raise "
        "`timeout_ms`",
    ),
    ErrorKind(
        "navigation_failed",
        "a navigation failed: a network error (retried) or an answer the page cannot use",
        "check the URL; a network error is retried on its own",
    ),
    ErrorKind(
        "host_unresolved",
        "the URL's host name did not resolve (retried: DNS may answer next time)",
        "check the host name in the URL",
    ),
    ErrorKind(
        "target_unavailable",
        "the target answered 5xx or 429, or its circuit is open (retried after backoff)",
        "nothing: the job runs again once the site answers; see `GET /v1/domains`",
    ),
    ErrorKind(
        "egress_refused",
        "the egress policy refused an address (loopback, private, metadata) or a redirect",
        "use a public URL; a tenant allow list is set by an operator",
    ),
    ErrorKind(
        "proxy_failed",
        "the job's own proxy (options.proxy) did not connect (retried)",
        "check the proxy's address and that it is up",
    ),
    ErrorKind(
        "proxy_auth_failed",
        "the job's proxy refused its credentials",
        "fix the proxy credentials (a secret reference)",
    ),
    ErrorKind(
        "browser_crashed",
        "Chromium crashed or disconnected (retried on a fresh browser)",
        "nothing; a page that crashes it every time needs a smaller job",
    ),
    ErrorKind(
        "assertion_failed",
        "an `assert` step did not hold, or a `dialog` step's dialog was not the one "
        "expected (its message or kind) or never came",
        "the page is not what the workflow expects: read the failure screenshot",
    ),
    ErrorKind(
        "data_quality",
        "the result failed the job's `expect` rules (`error.details` lists each problem)",
        "look at the page or relax the expectation",
    ),
    ErrorKind(
        "invalid_workflow",
        "the workflow cannot run as written (an input missing, a name used twice, options "
        "the browser refuses, ...)",
        "fix the workflow; `POST /v1/jobs/validate` checks it before you submit",
    ),
    ErrorKind(
        "invalid_input",
        "an input a step uses cannot be used (e.g. an upload that is not base64)",
        "fix the input's value",
    ),
    ErrorKind(
        "evaluate_refused",
        "an `evaluate` step, but the tenant's policy has `allow_evaluate` off",
        "remove the step, or ask an operator to allow it",
    ),
    ErrorKind(
        "result_too_large",
        "the job's result is over its size bound",
        "extract less, or save it as an artifact (`result_artifact`)",
    ),
    ErrorKind(
        "artifact_too_large",
        "an artifact is over the artifact size bound",
        "capture less (a clip, a smaller page)",
    ),
    ErrorKind(
        "artifact_upload_failed",
        "an artifact could not be stored in S3 (retried)",
        "nothing; if it persists, see the runbooks",
    ),
    ErrorKind(
        "download_failed",
        "a `download` step got no file",
        "check what the click starts; raise its timeout",
    ),
    ErrorKind(
        "video_unavailable",
        "`options.video` asked for, but this worker cannot record",
        "submit without `options.video`, or to a pool that records",
    ),
    ErrorKind(
        "video_failed",
        "the video could not be kept (retried)",
        "nothing; submit without `options.video` if it persists",
    ),
    ErrorKind(
        "replay_unavailable",
        "an offline replay could not read the replayed job's `har.zip` (expired, deleted)",
        "replay a job whose HAR is still kept (debug retention for a failed job)",
    ),
    ErrorKind(
        "har_failed",
        "the HAR (`options.har: true`) could not be written (retried)",
        "nothing; submit without `options.har` if it persists",
    ),
    ErrorKind(
        "secret_not_found",
        "a `{{secrets.NAME}}` reference names no secret of the tenant",
        "create the secret, or fix its name",
    ),
    ErrorKind(
        "secret_unreadable",
        "the secret exists but cannot be used (its policy, its key, a binary value)",
        "fix the secret, then resubmit",
    ),
    ErrorKind(
        "secrets_unavailable",
        "Secrets Manager did not answer (retried)",
        "nothing; the job runs again",
    ),
    ErrorKind(
        "session_not_found",
        "a `use_session` step (`required`, the default) names a saved login never saved or expired",
        "run the job that saves it first (`save_session`)",
    ),
    ErrorKind(
        "session_too_large",
        "a `save_session` step's cookies and storage are over the bound",
        "save from a page with less stored state",
    ),
    ErrorKind(
        "sessions_unavailable",
        "saved logins could not be read or written (retried when S3 failed)",
        "nothing when retried; else the worker has no session store configured",
    ),
    ErrorKind(
        "policy_unavailable",
        "the tenant's policy could not be read (retried)",
        "nothing; the job runs again",
    ),
    ErrorKind(
        "tenant_access_failed",
        "the worker could not assume the tenant's job role (retried)",
        "nothing; if it persists, see the runbooks",
    ),
    ErrorKind(
        "parent_unavailable",
        "a parent job's result (`depends_on`) could not be read (retried)",
        "nothing; the job runs again",
    ),
    ErrorKind(
        "dependency_failed",
        "a job in `depends_on` did not succeed: this one is cancelled",
        "fix and resubmit the parent, then this job",
    ),
    ErrorKind(
        "baseline_unavailable",
        "a monitor's baseline could not be read (retried)",
        "nothing; pin a new baseline if it is gone",
    ),
    ErrorKind(
        "checkpoint_failed",
        "the checkpoint before an irreversible step could not be written; the step did not run",
        "nothing: retried, and the step is still safe to run",
    ),
    ErrorKind(
        "check_failed",
        "an irreversible step's check could not tell whether it took effect",
        "resolve the job: `POST /v1/jobs/{id}/resolve`",
    ),
    ErrorKind(
        "needs_review",
        "an irreversible step may have taken effect, or the worker of a job waiting for a "
        "person stopped (the browser and the work in it are gone): the job waits for a person",
        "look at the site, then resolve the job (done / not done)",
    ),
    ErrorKind(
        "human_timeout",
        "an await_human step waited its timeout_s and nobody continued the job",
        "resubmit when someone can answer (POST /v1/jobs/{id}/continue), or raise timeout_s",
    ),
    ErrorKind(
        "compensated",
        "an irreversible step was undone by its compensation",
        "resubmit if the effect is still wanted",
    ),
    ErrorKind(
        "cancelled",
        "the job was cancelled (by its tenant or by a failed dependency)",
        "nothing; resubmit to run it",
    ),
    ErrorKind(
        "timeout",
        "the job ran past its `options.job_timeout_s`",
        "raise `options.job_timeout_s` or do less in one job",
    ),
    ErrorKind(
        "cost_cap_reached",
        "a job's attempts, or a browser session, spent what its `max_cost_usd` buys (a job "
        "is stopped mid-run and not retried; a session is closed between its commands)",
        "resubmit the job (open another session) with a higher `max_cost_usd`, or leave it out",
    ),
    ErrorKind(
        "expired",
        "the job did not start before its `deadline`",
        "resubmit with a later deadline",
    ),
    ErrorKind(
        "interrupted",
        "the worker drained (a deploy, a scale-in) before the job finished (retried)",
        "nothing; it runs again elsewhere",
    ),
    ErrorKind(
        "lease_expired",
        "the worker stopped heartbeating (killed, frozen): another takes the job back",
        "nothing; after five such deaths the job is `dead_lettered`",
    ),
    ErrorKind(
        "dead_lettered",
        "its message was received too often, or its workers died on it five times",
        "look at its attempts, then redrive: `pagefleet dead-letters --redrive`",
    ),
    ErrorKind(
        "internal_error",
        "a fault of the worker's (retried)",
        "nothing; if it persists, report it with the job id",
    ),
    ErrorKind(
        "not_configured",
        "a browser session reached a worker that takes none",
        "an operator's fix: the pool's configuration",
    ),
    ErrorKind(
        "observe_failed",
        "a browser session's observation (its screenshot) failed",
        "send the step again",
    ),
)
