# Sourced by scripts/test and scripts/demo: make a fresh machine ready, idempotently.
# Installs the Python venv (.venv) and, when we are root and it is missing, Debian's chromium.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# Debian's chromium installs in the background while pip installs the venv: on a fresh machine each takes
# about as long as the other.
need_chromium() { ! command -v chromium >/dev/null 2>&1; }
chromium_pid=""
chromium_log="$(mktemp)"
if [ "${OPENAB_SKIP_CHROMIUM:-}" != "1" ] && need_chromium; then
  if [ "$(id -u)" = "0" ]; then
    (
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null
      apt-get install -y -qq chromium >/dev/null
    ) >"$chromium_log" 2>&1 &
    chromium_pid=$!
  else
    echo "chromium is not installed: run 'sudo apt-get install chromium' (Debian) for the browser tests and the demo" >&2
  fi
fi

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
stamp=".venv/.openab-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  python -m pip install -q --disable-pip-version-check --upgrade pip
  python -m pip install -q --disable-pip-version-check -e ".[dev]"
  touch "$stamp"
fi

# mypy cannot follow setuptools' editable import hook, so it reads the
# namespace through this link farm (openab/<hop> -> <hop>/).
mkdir -p .dev/openab
for hop in gateway core bridge; do ln -sfn "../../$hop" ".dev/openab/$hop"; done

if [ -n "$chromium_pid" ] && ! wait "$chromium_pid"; then
  cat "$chromium_log" >&2
  echo "installing Debian's chromium failed (above)" >&2
  rm -f "$chromium_log"
  exit 1
fi
rm -f "$chromium_log"
