# Sourced by the bench scripts that start servers: a scratch folder ($work) removed at exit, the
# server process ($server_pid, when set) stopped at exit, and a random local port ($port).
work=$(mktemp -d)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
