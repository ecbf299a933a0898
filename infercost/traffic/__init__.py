"""Request logs a team imports: parsing the public trace formats and its own, the read
(rates, peaks, lengths, prefix reuse) and the rows a replay or a plan reads back."""
