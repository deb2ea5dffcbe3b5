"""Pure scheduling rules, with no Ray in sight: which trial goes next (`dispatch`), how many slots
a node offers (`slot_plan`), the sweep's cost budget and retry backoff (`budget`), and how long a
trial is expected to take (`durations`). The Ray code in `reb_ray.orchestrators` applies them."""
