"""The sandbox providers and helpers that speak the Docker Engine API (through the docker SDK).

What is here only makes sense with an engine that serves that API: the Docker provider
(`docker_sandbox`), the connection to its daemon (`docker_client`), the container options that
restrict a sandbox (`hardening`), the sandbox image's build, save, load and copy (`image`), the
node's GPU-container check (`gpu_check`), the reaper of orphaned containers and images
(`reaper`), and the Podman provider (`podman_sandbox`): Podman serves the same API, so its
provider is the Docker one with another socket, another create endpoint and read-back limits.

The rest of reb_ray reaches these providers through the registry (`reb_ray.sandbox.provider_class`,
`open_sandbox`) and the `Sandbox` interface (reb_ray.sandbox.base), including the engine's
class-level methods (`connect_engine`, `require_image`, ...); the provider-neutral modules of
reb_ray/sandbox/ never import this package (tests/test_layers.py holds that rule).
"""
