# Sourced by scripts/test and scripts/demo: make a fresh machine ready, idempotently.
# Installs the Python venv (.venv) at the versions constraints.txt pins (the image's too) and, when we are root
# and they are missing, Debian's chromium and the container tools the image test builds and runs the image with
# (buildah, podman, runc, debootstrap: tests/test_image_container.py), and adduser and Debian's python3-venv for
# the one-machine JupyterHub recipe's tests.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Debian's packages install in the background while pip installs the venv: on a fresh machine each takes
# about as long as the other.
debs=()
if [ "${OPENAB_SKIP_CHROMIUM:-}" != "1" ] && ! command -v chromium >/dev/null 2>&1; then debs+=(chromium); fi
for tool in buildah podman runc debootstrap adduser; do
  if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then debs+=("$tool"); fi
done
# The one-machine JupyterHub recipe's tests (tests/hub_harness.py) make the recipe's /opt/openab venv from a Python
# every person can run: Debian's, with its venv module.
if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c "import ensurepip, venv" >/dev/null 2>&1; then debs+=(python3-venv); fi
chromium_pid=""
chromium_log="$(mktemp)"
if [ "${#debs[@]}" != 0 ]; then
  if [ "$(id -u)" = "0" ]; then
    (
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null
      apt-get install -y -qq "${debs[@]}" >/dev/null
    ) >"$chromium_log" 2>&1 &
    chromium_pid=$!
  else
    echo "missing ${debs[*]}: run 'sudo apt-get install ${debs[*]}' (Debian) for the browser tests, the demo and the image test" >&2
  fi
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=".venv/.openab-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints.txt -nt "$stamp" ]; then
  python -m pip install -q --disable-pip-version-check --upgrade pip
  # This checkout installed as `openab` before the project took its own name on the index (openab-browser): that
  # older editable install holds the `openab` command and would be taken for the index's other project.
  if python -m pip show openab 2>/dev/null | grep -qx "Editable project location: $PWD"; then
    python -m pip uninstall -q -y openab
  fi
  python -m pip install -q --disable-pip-version-check -c constraints.txt -e ".[dev,hub]"
  touch "$stamp"
fi

# mypy cannot follow setuptools' editable import hook, so it reads the
# namespace through this link farm (openab/<hop> -> <hop>/).
rm -rf .dev/openab  # the namespace's name before it was openab_browser
mkdir -p .dev/openab_browser
for hop in gateway core bridge; do ln -sfn "../../$hop" ".dev/openab_browser/$hop"; done

# The Python MCP clients of the older revisions (tests/test_mcp_clients.py): one `mcp` 1.x release per venv in
# .venv-mcp/<version>, as tests/mcp_clients/python/mcp-<version>.txt locks it (the suite's own venv has mcp 2.x).
# Whole locks installed without resolving: pip's newest dependencies break the oldest releases. The suite's pip
# installs them (--python), so the venvs need no pip of their own; they build side by side, and again only when
# their lock changes.
mcp_venv_pids=()
mkdir -p .venv-mcp
for lock in tests/mcp_clients/python/mcp-*.txt; do
  version="$(basename "$lock" .txt)"
  venv=".venv-mcp/${version#mcp-}"
  if [ -f "$venv/.openab-installed" ] && [ ! "$lock" -nt "$venv/.openab-installed" ]; then continue; fi
  (
    rm -rf "$venv"
    "$PY" -m venv --without-pip "$venv"
    python -m pip --python "$venv/bin/python" install -q --disable-pip-version-check --no-deps -r "$lock"
    touch "$venv/.openab-installed"
  ) >"$venv.log" 2>&1 &
  mcp_venv_pids+=("$!:$venv")
done
for job in "${mcp_venv_pids[@]}"; do
  if ! wait "${job%%:*}"; then
    cat "${job#*:}.log" >&2
    echo "making ${job#*:} failed (above)" >&2
    exit 1
  fi
  rm -f "${job#*:}.log"
done

if [ -n "$chromium_pid" ] && ! wait "$chromium_pid"; then
  cat "$chromium_log" >&2
  echo "installing Debian's ${debs[*]} failed (above)" >&2
  rm -f "$chromium_log"
  exit 1
fi
rm -f "$chromium_log"
