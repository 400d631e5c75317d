#!/usr/bin/env bash
# Differential test (interop scenario 7): the same request sequences go to the official Java
# NameServer and to ours; every answer is compared (see src/NamesrvDiff.java).
#
#   interop/diff/run.sh <path-to-mqnamesrv>   # ours = that binary
#   interop/diff/run.sh java                  # ours = a second Java NameServer (proves the harness)
#   interop/diff/run.sh java-5.3.3            # ours = the Java NameServer of another release
#
# Exit 0 = no difference outside the allow-list in NamesrvDiff.java. Needs Java 17 and Maven; the
# first run downloads the RocketMQ jars into lib/<version>/ (cached; later runs are offline).
# ROCKETMQ_VERSION=x.y.z compares against another release (default: the pom's, the newest 5.x).
# DIFF_VERBOSE=1 prints every step with Java's answer.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=scripts/lib.sh
source "$here/../../scripts/lib.sh"
[[ $# -eq 1 ]] || { echo "usage: $0 <path-to-mqnamesrv>|java|java-VERSION" >&2; exit 2; }
ours="$1"
if [[ "$ours" != java* ]]; then
    [[ -x "$ours" ]] || { echo "not an executable: $ours" >&2; exit 2; }
    ours="$(cd "$(dirname "$ours")" && pwd)/$(basename "$ours")"
fi

version="${ROCKETMQ_VERSION:-$(sed -n 's:.*<rocketmq.version>\(.*\)</rocketmq.version>.*:\1:p' "$here/pom.xml")}"
fetch_jars() { # VERSION -> lib dir
    local dir="$here/lib/$1"
    if ! maven_cached "$dir"; then
        echo "fetching RocketMQ $1 jars into $dir" >&2
        maven_fetch "$dir" "$here" "" -Drocketmq.version="$1" -DincludeScope=runtime
    fi
    echo "$dir"
}
lib="$(fetch_jars "$version")"
classes="$here/target/classes-$version"
if [[ ! -f "$classes/NamesrvDiff.class" || "$here/src/NamesrvDiff.java" -nt "$classes/NamesrvDiff.class" ]]; then
    mkdir -p "$classes"
    javac -encoding UTF-8 -nowarn -d "$classes" -cp "$lib/*" "$here/src/NamesrvDiff.java"
fi
echo "reference: Apache RocketMQ $version NameServer"

work="$(mktemp -d -t namesrv-diff.XXXXXX)"
pids=()
cleanup() {
    local rc=$?
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [[ $rc -eq 0 ]]; then rm -rf "$work"; else echo "server logs kept in $work" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

jvm_small=(-Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1)

# start_server NAME CMD... : runs in $work/NAME with a -c file; sets $addr from the boot line.
start_server() {
    local name="$1"; shift
    local dir="$work/$name"
    mkdir -p "$dir/home"
    printf 'listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath=%s\n' "$dir/home/namesrv/kvConfig.json" > "$dir/namesrv.conf"
    (cd "$dir" && HOME="$dir/home" ROCKETMQ_HOME="$dir/home" exec "$@" -c "$dir/namesrv.conf" >"$dir/stdout" 2>"$dir/stderr") &
    pids+=($!)
    if ! addr="$(wait_boot "$name" "$dir/stdout" "${pids[-1]}" 60 2>/dev/null)"; then
        echo "$name NameServer did not start; its output:" >&2
        tail -n 30 "$dir/stdout" "$dir/stderr" >&2
        exit 1
    fi
    echo "$name NameServer at $addr"
}

java_namesrv() { # NAME LIBDIR
    local dir="$work/$1"
    start_server "$1" java "${jvm_small[@]}" "${JVM_OPENS[@]}" -Duser.home="$dir/home" \
        -cp "$2/*" org.apache.rocketmq.namesrv.NamesrvStartup
}

start=$SECONDS
java_namesrv java "$lib"
java_addr="$addr"
if [[ "$ours" == java ]]; then
    java_namesrv ours "$lib"
elif [[ "$ours" == java-* ]]; then
    java_namesrv ours "$(fetch_jars "${ours#java-}")"
else
    start_server ours "$ours"
fi
ours_addr="$addr"

rc=0
java "${jvm_small[@]}" "${JVM_OPENS[@]}" -Drocketmq.client.logUseSlf4j=false -cp "$classes:$lib/*" \
    NamesrvDiff "$java_addr" "$ours_addr" || rc=$?
echo "differential run took $((SECONDS - start)) s"
exit $rc
