#!/usr/bin/env bash
# Set up a machine for reb-ray (Debian, as root): system packages, a Docker daemon, the package in
# ./.venv with its test extra, and the sandbox image. Safe to run again: every step is skipped
# when already done (the venv's install when pyproject.toml and the extras are those it was made with).
#
#   bash scripts/setup.sh          # a development or CI machine: also what the tests use
#                                  # (the test extra, Chromium, harbor in .venv-harbor)
#   bash scripts/setup.sh --node   # a cluster node (cluster.yaml runs this): what sweeps use,
#                                  # the runtime extras (wandb, assets, plots), nothing test-only
set -euo pipefail
cd "$(dirname "$0")/.."

node=false
case "${1:-}" in
  "") ;;
  --node) node=true ;;
  *) echo "setup: unknown argument ${1}: the only option is --node (a cluster node)" >&2; exit 2 ;;
esac

need_apt=()
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
command -v git >/dev/null 2>&1 || need_apt+=(git)
# `ray up cluster.yaml` reaches nodes by SSH and copies this checkout with rsync (both ends).
command -v rsync >/dev/null 2>&1 || need_apt+=(rsync)
command -v ssh >/dev/null 2>&1 || need_apt+=(openssh-client)
# strace: the probe toolbox carries it (with its libraries) to trace each command stage
command -v strace >/dev/null 2>&1 || need_apt+=(strace)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv python3-pip)
# headless Chromium: the HTML report's tests open the page in a real browser (tests/analysis/browser.py)
$node || command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# the podman sandbox provider: rootless Podman (tests/sandbox/test_podman.py runs it as a non-root
# user it adds): the engine, subordinate id tools, rootless networking and overlay for a user
command -v podman >/dev/null 2>&1 || need_apt+=(podman)
command -v newuidmap >/dev/null 2>&1 || need_apt+=(uidmap)
command -v slirp4netns >/dev/null 2>&1 || need_apt+=(slirp4netns)
command -v fuse-overlayfs >/dev/null 2>&1 || need_apt+=(fuse-overlayfs)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

bash scripts/start-docker.sh

# pip's "Location ... is ignored" noise from host-wide find-links that do not exist is dropped.
quiet_pip() { "$@" 2> >(grep -v "^WARNING: Location .* is ignored" >&2); }

# The venv is made without ensurepip, which byte-compiles the pip it installs only for the next
# step to replace it: the interpreter's own bundled pip wheel, run as it is, installs the
# current pip (ensurepip where no such wheel is found).
if [ ! -x .venv/bin/python ]; then
  python3 -m venv --without-pip .venv
fi
if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
  bundled="$(python3 -c 'import ensurepip, os; print(os.path.dirname(ensurepip.__file__))' 2>/dev/null)/_bundled"
  wheel="$(ls "$bundled"/pip-*.whl /usr/share/python-wheels/pip-*.whl 2>/dev/null | head -n 1 || true)"
  echo "setup: installing pip into .venv"
  if [ -n "$wheel" ]; then
    quiet_pip .venv/bin/python "$wheel/pip" install -q --upgrade pip >/dev/null
  else
    .venv/bin/python -m ensurepip -q && quiet_pip .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  fi
fi
# reb-ray is installed editable, so a changed source needs no new install; a changed
# pyproject.toml (dependencies, entry points) or another set of extras does. The stamp holds what
# the last install was made from; a finished install writes it, a failed one leaves the old.
extras=test
$node && extras=wandb,assets,plots
stamp=.venv/.reb-ray-installed
want="$extras $(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ -x .venv/bin/reb-ray ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "setup: reb-ray already installed in .venv ([$extras], pyproject.toml unchanged)"
else
  echo "setup: installing reb-ray[$extras] into .venv (a first install downloads its dependencies: a few minutes, no progress shown)"
  rm -f "$stamp"
  quiet_pip .venv/bin/python -m pip install -q -e ".[$extras]"
  echo "$want" > "$stamp"
fi

# Harbor (tests/harbor: the interop runs the real `harbor run`) needs Python >= 3.12, newer than
# the venv's; it gets a venv of its own from the first such interpreter found (pyenv's included).
# A cluster node runs no tests: reb-ray itself never imports harbor.
if ! $node && [ ! -x .venv-harbor/bin/harbor ]; then
  py312=""
  for candidate in python3.13 python3.12 /root/.pyenv/versions/3.13*/bin/python3 /root/.pyenv/versions/3.12*/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      py312="$candidate"; break
    fi
  done
  if [ -n "$py312" ]; then
    echo "setup: installing harbor into .venv-harbor ($py312)"
    "$py312" -m venv .venv-harbor
    .venv-harbor/bin/python -m pip install -q "harbor>=0.25,<0.26" 2> >(grep -v "^WARNING: Location .* is ignored" >&2)
  else
    echo "setup: no Python >= 3.12 found: harbor not installed (its interop tests skip)" >&2
  fi
fi

# `harbor run` on local Docker drives the Docker Compose v2 CLI plugin (`docker compose`), which
# bookworm does not package: take the plugin binary (static Go, glibc only) from trixie's
# docker-compose package, fetched with apt into a scratch directory (the system's lists untouched).
if ! $node && [ -x .venv-harbor/bin/harbor ] && ! docker compose version >/dev/null 2>&1; then
  echo "setup: installing the docker compose plugin (Debian trixie's docker-compose)"
  scratch="$(mktemp -d)"
  mkdir -p "$scratch/lists/partial" "$scratch/cache/archives/partial"
  # the Debian mirror this machine's own apt sources name
  mirror="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)"
  [ -n "$mirror" ] || mirror="$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list)"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" > "$scratch/trixie.list"
  apt_opts=(-o APT::Sandbox::User=root -o "Dir::Etc::SourceList=$scratch/trixie.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$scratch/lists" -o "Dir::Cache=$scratch/cache")
  apt-get "${apt_opts[@]}" update -qq
  (cd "$scratch" && apt-get "${apt_opts[@]}" download docker-compose >/dev/null 2>&1)
  dpkg-deb -x "$scratch"/docker-compose_*.deb "$scratch/x"
  mkdir -p /usr/local/lib/docker/cli-plugins
  install -m 755 "$scratch/x/usr/libexec/docker/cli-plugins/docker-compose" /usr/local/lib/docker/cli-plugins/docker-compose
  rm -rf "$scratch"
fi

.venv/bin/reb-ray image build --profile "${REB_RAY_IMAGE_PROFILE:-minimal}"
