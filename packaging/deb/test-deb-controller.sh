#!/usr/bin/env bash
# Builds the mqcontroller Debian package, installs it, runs the installed node as the packaged
# service would (systemd aside) with the packaged config until /readyz answers and it leads its
# one-node group, stops it with SIGTERM (it must exit 0), then removes the package (the store
# must stay) and purges it (store, config and user must go). Then beside mqnamesrv: the
# rocketmq user both packages share must outlive the purge of either while the other is there.
# Needs root, dpkg and cargo-deb; changes the system, so it refuses to run where either package
# or a rocketmq user exists.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
[ "$(id -u)" = 0 ] || fail "must run as root (it installs packages)"
command -v dpkg >/dev/null || fail "dpkg not found"
cargo deb --version >/dev/null 2>&1 || fail "cargo-deb not found: cargo install cargo-deb --locked"
installed() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qv '^not-installed$'; }
for p in mqcontroller mqnamesrv; do
    if installed "$p"; then fail "$p is installed here; not touching it"; fi
done
# Who creates and who deletes the user is what this checks.
if getent passwd rocketmq >/dev/null; then fail "a rocketmq user exists here; not touching it"; fi

# Incremental: reuses an up-to-date build of DEB_PROFILE (default release; see test-deb.sh).
# cargo-deb reads the binaries from Cargo's target directory (CARGO_TARGET_DIR included) and
# prints where it wrote the package.
profile=${DEB_PROFILE:-release}
cargo build --profile "$profile" --locked -p rocketmq-controller -p namesrv -p namesrv-admin
ctl_deb=$(cargo deb -p rocketmq-controller --no-build --profile "$profile" --strip | tail -n1)
[ -f "$ctl_deb" ] || fail "cargo deb did not produce the mqcontroller package: $ctl_deb"
ns_deb=$(cargo deb -p namesrv --no-build --profile "$profile" --strip | tail -n1)
[ -f "$ns_deb" ] || fail "cargo deb did not produce the mqnamesrv package: $ns_deb"
log "built $ctl_deb and $ns_deb"

work=$(mktemp -d)
chmod 755 "$work"
node=
cleanup() {
    if [ -n "$node" ]; then kill "$node" 2>/dev/null || true; wait "$node" 2>/dev/null || true; fi
    for p in mqcontroller mqnamesrv; do
        if installed "$p"; then dpkg --purge "$p" >/dev/null 2>&1 || true; fi
    done
    rm -rf "$work"
}
trap cleanup EXIT

# status and body of a GET, "000" when nothing answers.
http_get() {
    python3 - "$1" <<'PY'
import sys, urllib.request, urllib.error
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
        print(r.status); print(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); print(e.read().decode())
except Exception as e:
    print("000"); print(e)
PY
}

dpkg -i "$ctl_deb"
[ -x /usr/bin/mqcontroller ] || fail "/usr/bin/mqcontroller not installed"
unit=/usr/lib/systemd/system/mqcontroller.service
[ -f "$unit" ] || fail "$unit not installed"
grep -qx 'User=rocketmq' "$unit" || fail "the unit does not run as rocketmq"
grep -qx 'ExecStart=/usr/bin/mqcontroller -c /etc/mqcontroller/controller.conf' "$unit" \
    || fail "the unit does not start the packaged config"
grep -qx 'Restart=on-failure' "$unit" || fail "the unit does not restart a node that fail-stops"
grep -qx /etc/mqcontroller/controller.conf /var/lib/dpkg/info/mqcontroller.conffiles \
    || fail "the config is not a conffile"
for f in controller-dashboard.json; do
    [ -f "/usr/share/doc/mqcontroller/grafana/$f" ] || fail "$f not installed"
done
[ -f /usr/share/doc/mqcontroller/prometheus/controller-rules.yml ] || fail "the alert rules are not installed"
getent passwd rocketmq >/dev/null || fail "postinst did not create the rocketmq user"
[ "$(stat -c %U:%G:%a /var/lib/mqcontroller)" = rocketmq:rocketmq:750 ] \
    || fail "/var/lib/mqcontroller is not rocketmq's alone: $(stat -c %U:%G:%a /var/lib/mqcontroller)"

# The packaged config as it is, unless its ports are taken on this machine: then a copy with
# free ones (the store path and everything else as packaged).
config=/etc/mqcontroller/controller.conf
port=9878
http_port=5557
if ! port_free 9878 || ! port_free 5557; then
    port=$(free_port)
    http_port=$(free_port)
    config=$work/controller.conf
    sed -e "s/^controllerDLegerPeers=.*/controllerDLegerPeers=n0-127.0.0.1:$port/" \
        -e "s/^metricsPromExporterPort=.*/metricsPromExporterPort=$http_port/" \
        /etc/mqcontroller/controller.conf > "$config"
    chmod 644 "$config"
    log "9878 or 5557 busy, using ports $port and $http_port"
fi

# setpriv execs the node in its place, as systemd does, so that the SIGTERM below reaches the
# node itself and its exit status is the node's (runuser would stay in between, kill the node
# two seconds after passing the signal on, and exit 143 whatever the node did).
setpriv --reuid=rocketmq --regid=rocketmq --init-groups \
    env HOME=/var/lib/mqcontroller /usr/bin/mqcontroller -c "$config" > "$work/out" 2>&1 &
node=$!
ready=
for _ in $(seq 100); do
    kill -0 "$node" 2>/dev/null || { cat "$work/out"; fail "the installed node exited"; }
    answer=$(http_get "http://127.0.0.1:$http_port/readyz")
    if [ "${answer%%$'\n'*}" = 200 ]; then ready=1; break; fi
    sleep 0.2
done
[ -n "$ready" ] || { cat "$work/out"; http_get "http://127.0.0.1:$http_port/readyz"; fail "/readyz not 200 within 20 s"; }
grep -q "Controller Server boot success, address 127.0.0.1:$port" "$work/out" \
    || { cat "$work/out"; fail "no boot line naming 127.0.0.1:$port"; }
metrics=$(http_get "http://127.0.0.1:$http_port/metrics")
[ "${metrics%%$'\n'*}" = 200 ] || fail "/metrics: $metrics"
grep -qx 'namesrv_controller_is_leader 1' <<<"$metrics" \
    || fail "the one-node group does not lead itself: $(grep is_leader <<<"$metrics")"
[ "$(stat -c %U /var/lib/mqcontroller/store/raft.redb)" = rocketmq ] \
    || fail "the store is not in /var/lib/mqcontroller/store, written by rocketmq"
log "the installed node is ready on 127.0.0.1:$http_port, leads, and keeps its store in /var/lib/mqcontroller"

# 0 only for a graceful stop: a SIGTERM the node does not handle kills it (143).
kill -TERM "$node"
for _ in $(seq 100); do kill -0 "$node" 2>/dev/null || break; sleep 0.2; done
kill -0 "$node" 2>/dev/null && fail "the node did not stop on SIGTERM within 20 s"
status=0
wait "$node" || status=$?
node=
[ "$status" = 0 ] || { cat "$work/out"; fail "the node exited $status on SIGTERM, not 0"; }
log "stopped gracefully on SIGTERM"

dpkg -r mqcontroller
[ ! -e /usr/bin/mqcontroller ] || fail "remove left /usr/bin/mqcontroller"
[ -f /var/lib/mqcontroller/store/raft.redb ] || fail "remove deleted the store"
[ -f /etc/mqcontroller/controller.conf ] || fail "remove deleted the conffile"
getent passwd rocketmq >/dev/null || fail "remove deleted the user owning the store"
log "removed; the store, config and user kept"

dpkg --purge mqcontroller
[ ! -e /var/lib/mqcontroller ] || fail "purge left /var/lib/mqcontroller"
[ ! -e /etc/mqcontroller/controller.conf ] || fail "purge left the conffile"
! getent passwd rocketmq >/dev/null || fail "purge left the rocketmq user (mqnamesrv is not installed)"
log "purged; store, config and user gone"

# Beside mqnamesrv, which creates the user first here.
dpkg -i "$ns_deb" "$ctl_deb" >/dev/null
[ "$(getent passwd rocketmq | cut -d: -f6)" = /var/lib/mqnamesrv ] || fail "mqnamesrv did not create the user"
[ "$(stat -c %U /var/lib/mqcontroller)" = rocketmq ] || fail "mqcontroller did not reuse the user"
dpkg --purge mqnamesrv >/dev/null
getent passwd rocketmq >/dev/null || fail "purging mqnamesrv deleted the user mqcontroller runs as"
[ "$(stat -c %U /var/lib/mqcontroller)" = rocketmq ] || fail "mqcontroller's store lost its owner"
dpkg -i "$ns_deb" >/dev/null
dpkg --purge mqcontroller >/dev/null
getent passwd rocketmq >/dev/null || fail "purging mqcontroller deleted the user mqnamesrv runs as"
# Removed with its state kept, mqnamesrv still has files the user owns.
dpkg -i "$ctl_deb" >/dev/null
dpkg -r mqnamesrv >/dev/null
dpkg --purge mqcontroller >/dev/null
getent passwd rocketmq >/dev/null || fail "purging mqcontroller deleted the owner of mqnamesrv's kept state"
dpkg --purge mqnamesrv >/dev/null
! getent passwd rocketmq >/dev/null || fail "purging the last of the two left the user"
log "beside mqnamesrv: the user outlives either purge while the other is there, and goes with the last"
log "ok"
