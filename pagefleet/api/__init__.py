"""The REST API's contract: every response body, as typed models, one module per resource
(jobs, batches, schedules, workflows, domains, live, notify, meta, errors) on one base
(``pagefleet.view.View``).

The API handlers serialize through these models, the OpenAPI document is generated from
them (``docs/openapi.json``), and the Python client (``pagefleet.client``) parses the
API's answers with the very same classes, so the three cannot drift apart.
"""
