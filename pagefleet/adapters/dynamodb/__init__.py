"""DynamoDB adapters: the job store, the tenant store, pagination cursors, the breakers."""

from pagefleet.adapters.dynamodb.cursors import CursorCodec
from pagefleet.adapters.dynamodb.job_store import DynamoJobStore
from pagefleet.adapters.dynamodb.tenant_store import DynamoTenantStore

__all__ = ["CursorCodec", "DynamoJobStore", "DynamoTenantStore"]
