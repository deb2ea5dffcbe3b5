"""A throwaway build container for the agents' toolchains: one command in a fresh container
of the sandbox image, its output, the container removed."""

from __future__ import annotations

from reb_ray.errors import RebRayError


def run_container(client, image: str, argv: list[str], mounts: dict[str, str], timeout_s: float,
                   read_only: tuple[str, ...] = ()) -> str:
    """Run `argv` in a throwaway container of `image` (host path -> sandbox path mounts, rw
    except those whose sandbox path is in `read_only`); its output. Raises RebRayError on a
    non-zero exit or a timeout; the container is removed."""
    from docker.errors import DockerException

    from reb_ray.models.sweep import HOST_CA_BUNDLE
    from reb_ray.sandbox.docker.docker_sandbox import CONTAINER_CA_BUNDLE
    from reb_ray.sandbox.ownership import container_labels

    volumes = {host: {"bind": inside, "mode": "ro" if inside in read_only else "rw"} for host, inside in mounts.items()}
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    if HOST_CA_BUNDLE.exists():
        volumes[str(HOST_CA_BUNDLE)] = {"bind": CONTAINER_CA_BUNDLE, "mode": "ro"}
        env.update(PIP_CERT=CONTAINER_CA_BUNDLE, SSL_CERT_FILE=CONTAINER_CA_BUNDLE)
    container = None
    try:
        container = client.containers.run(image, argv, detach=True, volumes=volumes, environment=env,
                                          labels=container_labels("toolchain", "install", 0))
        status = container.wait(timeout=timeout_s)
        output = container.logs().decode(errors="replace")
    except DockerException as exc:
        raise RebRayError(f"toolchain build container failed: {str(exc).splitlines()[0][:300]}") from None
    except Exception as exc:  # requests' ReadTimeout from wait()
        raise RebRayError(f"toolchain build container did not finish in {timeout_s:g} s ({type(exc).__name__})") from None
    finally:
        if container is not None:
            try:
                container.remove(force=True, v=True)
            except DockerException:
                pass
    if status.get("StatusCode") != 0:
        tail = output.strip().splitlines()[-1:] or ["(no output)"]
        raise RebRayError(f"toolchain build in {image} failed (exit {status.get('StatusCode')}): {tail[0][:300]}")
    return output
