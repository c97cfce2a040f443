"""``python -m functions.api``: print the API's OpenAPI document (docs/openapi.json)."""

from functions.api.app import app
from functions.api.openapi import render

print(render(app), end="")
