"""The REST API's contract: the bodies the API answers with and the client parses."""
