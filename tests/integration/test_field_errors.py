"""A refused field is answered the same way whichever route checked it: 422
``validation_error``, the field named by its path in the request, every problem listed.

Real authorizer and API handlers, API Gateway events, the session's moto server.
"""

from __future__ import annotations

from tests.support.api import ApiCaller

STEPS = [{"action": "goto", "url": "http://127.0.0.1:9/"}]
# Two problems in the browser options: a width under the minimum, a height that is no number.
BAD_OPTIONS = {"viewport": {"width": 10, "height": "tall"}}
PROBLEMS = {"options.viewport.width", "options.viewport.height"}


def fields(resp_error: dict[str, object]) -> set[str]:
    details = resp_error.get("details")
    assert isinstance(details, list), resp_error
    return {str(d["field"]) for d in details}


def test_a_workflows_options_are_refused_as_a_jobs_are(alice: ApiCaller) -> None:
    job = alice.call("POST", "/v1/jobs", {"steps": STEPS, "options": BAD_OPTIONS})
    workflow = alice.call("PUT", "/v1/workflows/shop", {"steps": STEPS, "options": BAD_OPTIONS})
    for resp in (job, workflow):
        assert resp.status == 422, resp.body
        assert resp.error["code"] == "validation_error"
        assert resp.error["field"] in PROBLEMS
        assert resp.error["message"].startswith(f"{resp.error['field']}: ")
        assert fields(resp.error) == PROBLEMS
    assert alice.call("GET", "/v1/workflows/shop").status == 404  # nothing was stored


def test_query_parameters_are_named_without_their_part_of_the_request(
    alice: ApiCaller,
) -> None:
    resp = alice.call("GET", "/v1/jobs", query="limit=0")
    assert resp.status == 422
    assert resp.error["field"] == "limit"
    assert fields(resp.error) == {"limit"}


def test_an_id_of_another_format_is_refused_naming_it_not_looked_up(alice: ApiCaller) -> None:
    """Ids are 26 lower-case characters everywhere (pagefleet.ids): a 64-character job id
    was looked up (404) and an upper-case schedule id let through before."""
    for method, path, query, field in (
        ("GET", "/v1/jobs/" + "a" * 64, "", "job_id"),
        ("GET", "/v1/jobs/abc/events", "", "job_id"),
        ("GET", "/v1/schedules/01J" + "0" * 23, "", "schedule_id"),
        ("GET", "/v1/jobs", "schedule_id=01J" + "0" * 23, "schedule_id"),
        ("GET", "/v1/browser-sessions/" + "0" * 25, "", "session_id"),
    ):
        resp = alice.call(method, path, query=query)
        assert resp.status == 422, (path, resp.body)
        assert resp.error["code"] == "validation_error" and resp.error["field"] == field
    assert alice.call("GET", "/v1/jobs/" + "0" * 26).status == 404  # the format is fine
