# What the scripts share; each sources this file (it sets no shell options and runs nothing).
# fetch_lib and build_harness work on the Java harness of the interop suites: they use the caller's
# JAVA_DIR (the harness), LIB (its lib dirs), LOGS and JAVA.

# The JVM options every RocketMQ peer needs on Java 17: the 8-era jars reach into JDK internals
# (direct buffers, unsafe, reflection).
JVM_OPENS=(--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED
  --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-exports=java.base/sun.nio.ch=ALL-UNNAMED)

# maven_cached DIR: whether DIR holds a complete fetch. Only a finished fetch leaves the stamp,
# so a directory an interrupted run left behind is never trusted.
maven_cached() { [[ -f $1/.complete ]]; }

# maven_fetch DIR POM_DIR LOG [MAVEN_ARG...]: copies the dependencies of the pom in POM_DIR into
# DIR, once. The copy is made beside DIR, stamped, and renamed into place only when Maven
# succeeded, so later runs need no network and never see half a cache. Maven's output goes to
# LOG (its tail is shown if it fails), or to stderr if LOG is empty.
maven_fetch() {
  local dir=$1 pom_dir=$2 log=$3
  shift 3
  maven_cached "$dir" && return 0
  local tmp=$dir.tmp
  rm -rf "$tmp"
  mkdir -p "$(dirname "$dir")"
  if [[ -n $log ]]; then
    (cd "$pom_dir" && mvn -B -q "$@" dependency:copy-dependencies -DoutputDirectory="$tmp") >"$log" 2>&1 \
      || { tail -30 "$log"; return 1; }
  else
    (cd "$pom_dir" && mvn -B -q "$@" dependency:copy-dependencies -DoutputDirectory="$tmp") >&2 \
      || return 1
  fi
  touch "$tmp/.complete"
  rm -rf "$dir" && mv "$tmp" "$dir"
}

# wait_boot NAME LOG PID TIMEOUT_S: waits until LOG holds a NameServer's boot line ("The Name
# Server boot success ... address HOST:PORT", ours and Java's alike) and prints HOST:PORT. Fails,
# saying why on stderr, if process PID exits first or TIMEOUT_S seconds pass.
wait_boot() {
  local name=$1 log=$2 pid=$3 deadline=$((SECONDS + $4)) line
  while ((SECONDS < deadline)); do
    line=$(grep -m1 'The Name Server boot success' "$log" 2>/dev/null) && break
    kill -0 "$pid" 2>/dev/null || { echo "$name exited before printing 'The Name Server boot success'" >&2; return 1; }
    sleep 0.1
  done
  [[ -n ${line:-} ]] || { echo "$name did not print 'The Name Server boot success' within $4 s" >&2; return 1; }
  sed -nE 's/.*address ([^ ]+:[0-9]+).*/\1/p' <<<"$line" | grep . \
    || { echo "cannot parse the address from: $line" >&2; return 1; }
}

# http_address LOG: the HOST:PORT of the HTTP port our server announced in LOG, if it did.
http_address() {
  sed -nE 's|.*The Name Server HTTP port: http://([^ /]+).*|\1|p' "$1" | head -1
}

# log MESSAGE...: a progress line. Its tag (LOG_TAG, by default the script's name) tells apart the
# lines of suites whose output ends up in one log.
log() { printf '[%s %s] %s\n' "${LOG_TAG:-${0##*/}}" "$(date +%H:%M:%S)" "$*"; }

# fetch_lib DIR PROFILE PROPERTY=VALUE...: the runtime jars of the harness pom's PROFILE, resolved
# with these properties, into $LIB/DIR (once: see maven_fetch); Maven's log is $LOGS/maven-DIR.log.
fetch_lib() {
  local dir=$1 profile=$2 p props=()
  shift 2
  maven_cached "$LIB/$dir" && return 0
  for p in "$@"; do props+=("-D$p"); done
  log "fetching $dir from Maven Central"
  maven_fetch "$LIB/$dir" "$JAVA_DIR" "$LOGS/maven-$dir.log" -P"$profile" "${props[@]}" -DincludeScope=runtime
}

# build_harness CLIENT_VERSION: compiles every class of the Java harness against $LIB/clients-VERSION.
# Both suites run the same classes, so they share one output dir and one stamp, and a suite
# recompiles only when a source is newer than the last build.
build_harness() {
  local stamp=$JAVA_DIR/target/classes/.built
  [[ ! -f $stamp || -n $(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$stamp" 2>/dev/null) ]] || return 0
  log "compiling the Java harness"
  rm -rf "$JAVA_DIR/target/classes" && mkdir -p "$JAVA_DIR/target/classes"
  "${JAVA%java}javac" -encoding UTF-8 --release 17 -d "$JAVA_DIR/target/classes" -cp "$LIB/clients-$1/*" \
    "$JAVA_DIR"/src/main/java/interop/*.java >"$LOGS/javac.log" 2>&1 || { cat "$LOGS/javac.log"; return 1; }
  touch "$stamp"
}

# scratch_dir NAME: makes a new directory for a suite's stores and logs and prints its path. Brokers
# mark their store full and refuse every message once its partition is 90 % used (5.x clamps a higher
# setting to 90 %), so on a disk that a build is filling the suites would fail for reasons that say
# nothing about the server under test. Unless TMPDIR names a place, a tmpfs with 4 GiB free
# (/dev/shm, where native libraries may be loaded from) is used, and /tmp otherwise.
scratch_dir() {
  local base=${TMPDIR:-}
  if [[ -z $base ]]; then
    base=/tmp
    if [[ -d /dev/shm && -w /dev/shm ]] && ! findmnt -no OPTIONS /dev/shm 2>/dev/null | grep -qw noexec \
      && (($(df -Pk /dev/shm | awk 'NR == 2 { print $4 }') > 4 * 1024 * 1024)); then
      base=/dev/shm
    fi
  fi
  mktemp -d "$base/$1.XXXXXX"
}

# warn_disk DIR: brokers refuse writes once their disk is 90 % full, which would show as failures
# that say nothing about the server under test.
warn_disk() {
  local used
  used=$(df -P "$1" | awk 'NR == 2 { sub("%", "", $5); print $5 }')
  ((used < 88)) || log "WARNING: the disk of $1 is ${used}% full; brokers refuse writes above 90%"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port: prints a port nothing uses now, below the kernel's range for outgoing connections
# (for a single server started at once; port_block keeps a broker's several ports together). A
# port the kernel picks is one it also hands to outgoing connections: one of them could take it
# before the server it was chosen for binds it.
free_port() {
  python3 - <<'EOF'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(1000):
    port = random.randrange(10000, max(low, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("no free port below the ephemeral range")
EOF
}

# fail MESSAGE...: says why on stderr, tagged like log, and ends the script.
fail() { log "FAIL: $*" >&2; exit 1; }

# port_block: sets BASE to the first of four consecutive free ports (a broker needs listenPort,
# listenPort-2 for the 5.x "fast" server, and its HA port). They come from below the ephemeral range,
# so that no outgoing connection takes them later (between restarts of the same peer), from a random
# start, so that concurrent runs rarely meet, and never twice in one run until the range wraps.
# Not echoed: a command substitution would lose NEXT_PORT.
NEXT_PORT=""
port_block() {
  if [[ -z $NEXT_PORT ]]; then
    EPHEMERAL_LO=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    ((EPHEMERAL_LO > 12000)) || EPHEMERAL_LO=32768
    NEXT_PORT=$((10000 + RANDOM % (EPHEMERAL_LO - 11000)))
  fi
  while :; do
    BASE=$NEXT_PORT; NEXT_PORT=$((NEXT_PORT + 4))
    ((NEXT_PORT < EPHEMERAL_LO - 8)) || NEXT_PORT=10000
    port_free "$BASE" && port_free $((BASE + 1)) && port_free $((BASE + 2)) && port_free $((BASE + 3)) && break
  done
}
