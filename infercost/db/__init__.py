"""Database plumbing shared by the api and the workers."""
