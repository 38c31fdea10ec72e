"""Where the search looks: the space from a catalog, the samplers, the rules' starts, the knobs that matter."""
