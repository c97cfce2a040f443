"""The API's routes, one Powertools ``Router`` per area, included by ``functions.api.app``."""
