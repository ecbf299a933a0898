"""POST /v1/imports: results of other tools stored as labelled runs."""
