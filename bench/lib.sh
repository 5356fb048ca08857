# Set-up shared by the bench scripts that count (sourced, not run):
#   require_tools <tool...>   exit with a message when one is not on PATH
#   tollgate_binary           TOLLGATE_BIN as given, or build the release binary and use it
#   port_free <port>          exit with a message when something answers on <port>

require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool is needed" >&2; exit 1; }
  done
}

tollgate_binary() {
  if [ -z "${TOLLGATE_BIN:-}" ]; then
    cargo build --release -q
    TOLLGATE_BIN="${CARGO_TARGET_DIR:-target}/release/tollgate"
  fi
}

port_free() {
  if redis-cli -p "$1" ping >/dev/null 2>&1; then
    echo "port $1 is already in use; set PORT to a free port" >&2
    exit 1
  fi
}
