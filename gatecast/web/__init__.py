"""The HTTP app: REST API, webhook receiver and dashboard, in one FastAPI process."""
