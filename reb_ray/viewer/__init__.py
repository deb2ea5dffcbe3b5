"""`reb-ray view OUTPUT`: a local web viewer of a results directory, read in place.

The viewer reads the `trials` and `stages` Parquet datasets lazily (reb_ray.viewer.data: a
projection of a few columns for the matrix, point lookups for one trial), computes the paper's
table in a child process with the same code as the terminal summary (reb_ray.viewer.summary),
and serves server-rendered pages (reb_ray.viewer.server) whose templates and stylesheet ship in
this package: nothing is fetched from elsewhere, and no page runs a script.
"""
