#!/usr/bin/env bash
# Builds the mqnamesrv Debian package, installs it, runs the installed server as the packaged
# service would (systemd aside) with the packaged config, asks it for a route and writes a KV
# value with the installed nsadmin, then removes the package (state must stay) and purges it
# (state and user must go). Needs root, dpkg and cargo-deb; changes the system, so it refuses
# to run where mqnamesrv is already installed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
[ "$(id -u)" = 0 ] || fail "must run as root (it installs a package)"
command -v dpkg >/dev/null || fail "dpkg not found"
cargo deb --version >/dev/null 2>&1 || fail "cargo-deb not found: cargo install cargo-deb --locked"
if dpkg-query -W -f='${Status}' mqnamesrv 2>/dev/null | grep -q 'installed'; then
    fail "mqnamesrv is already installed here; not touching it"
fi

# Incremental: reuses an up-to-date build of DEB_PROFILE (default release; the test command
# packages the dev build it already has, as a release build takes minutes and changes nothing
# this checks).
profile=${DEB_PROFILE:-release}
cargo build --profile "$profile" --locked -p namesrv -p namesrv-admin
deb=$(cargo deb -p namesrv --no-build --profile "$profile" --strip | tail -n1)
[ -f "$deb" ] || fail "cargo deb did not produce a package: $deb"
echo "test-deb: built $deb"

work=$(mktemp -d)
chmod 755 "$work"
server=
installed=
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    if [ -n "$installed" ]; then dpkg --purge mqnamesrv >/dev/null 2>&1 || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

installed=1
dpkg -i "$deb"
for f in /usr/bin/mqnamesrv /usr/bin/nsadmin /usr/lib/systemd/system/mqnamesrv.service; do
    [ -x "$f" ] || [ -f "$f" ] || fail "$f not installed"
done
grep -qx /etc/mqnamesrv/namesrv.properties /var/lib/dpkg/info/mqnamesrv.conffiles \
    || fail "the config is not a conffile"
getent passwd rocketmq >/dev/null || fail "postinst did not create the rocketmq user"
for d in /var/lib/mqnamesrv /var/log/mqnamesrv; do
    [ "$(stat -c %U:%G "$d")" = rocketmq:rocketmq ] || fail "$d is not owned by rocketmq"
done

# The packaged config as it is, unless its ports are taken on this machine: then a copy with
# free ones (everything else, the paths above all, as packaged).
config=/etc/mqnamesrv/namesrv.properties
port=9876
if ! port_free 9876 || ! port_free 9877; then
    port=$(free_port)
    config=$work/namesrv.properties
    { sed '/^listenPort=/d' /etc/mqnamesrv/namesrv.properties; echo "listenPort=$port"; echo "httpPort=0"; } > "$config"
    chmod 644 "$config"
    echo "test-deb: 9876 or 9877 busy, using port $port"
fi

runuser -u rocketmq -- env HOME=/var/lib/mqnamesrv /usr/bin/mqnamesrv -c "$config" > "$work/out" 2>&1 &
server=$!
for _ in $(seq 100); do
    grep -q "boot success" "$work/out" && break
    kill -0 "$server" 2>/dev/null || { cat "$work/out"; fail "the installed server exited"; }
    sleep 0.2
done
grep -q "boot success" "$work/out" || { cat "$work/out"; fail "the installed server did not boot in 20 s"; }

ns=127.0.0.1:$port
if answer=$(/usr/bin/nsadmin -n "$ns" topicRoute -t NoSuchTopic 2>&1); then
    fail "a route for a topic nobody registered: $answer"
fi
grep -q TOPIC_NOT_EXIST <<<"$answer" || fail "no route answer: $answer"
/usr/bin/nsadmin -n "$ns" clusterList >/dev/null || fail "clusterList failed"
/usr/bin/nsadmin -n "$ns" updateKvConfig -s TEST_DEB -k kept -v across-remove >/dev/null
[ "$(/usr/bin/nsadmin -n "$ns" getKvConfig -s TEST_DEB -k kept)" = across-remove ] || fail "KV value not read back"
grep -q across-remove /var/lib/mqnamesrv/kvConfig.json || fail "KV not written to /var/lib/mqnamesrv"
[ "$(stat -c %U /var/lib/mqnamesrv/kvConfig.json)" = rocketmq ] || fail "KV file not written by rocketmq"
compgen -G "/var/log/mqnamesrv/namesrv*log" >/dev/null || fail "no log in /var/log/mqnamesrv"
echo "test-deb: the installed server answers on $ns and keeps its KV store in /var/lib/mqnamesrv"

# runuser passes the SIGTERM on and waits for the server's graceful stop.
kill -TERM "$server"
for _ in $(seq 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.2; done
kill -0 "$server" 2>/dev/null && fail "the server did not stop on SIGTERM"
wait "$server" || true
server=

dpkg -r mqnamesrv
[ ! -e /usr/bin/mqnamesrv ] || fail "remove left /usr/bin/mqnamesrv"
grep -q across-remove /var/lib/mqnamesrv/kvConfig.json || fail "remove deleted the KV store"
[ -f /etc/mqnamesrv/namesrv.properties ] || fail "remove deleted the conffile"
getent passwd rocketmq >/dev/null || fail "remove deleted the user owning the data"
echo "test-deb: removed; /var/lib/mqnamesrv and its KV store kept"

dpkg --purge mqnamesrv
installed=
[ ! -e /var/lib/mqnamesrv ] || fail "purge left /var/lib/mqnamesrv"
[ ! -e /etc/mqnamesrv/namesrv.properties ] || fail "purge left the conffile"
! getent passwd rocketmq >/dev/null || fail "purge left the rocketmq user"
echo "test-deb: purged; data, config and user gone"
echo "test-deb: ok"
