"""Applications written apart from knobtune's kits, captured and replayed by the tests and the bench."""
