"""pagefleet: serverless browser automation on AWS."""

__version__ = "0.1.0"
