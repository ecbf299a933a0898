"""Results of other tools taken in as labelled runs."""
