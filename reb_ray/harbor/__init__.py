"""Harbor interop: reb-ray tasks written as Harbor tasks (export), Harbor tasks run by reb-ray (import)."""
