# What the scripts share; each sources this file (it sets no shell options and runs nothing).

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
