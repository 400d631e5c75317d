# What scripts/interop-controller and scripts/bench-controller share: artifacts, the controller group, the
# NameServer(s), the broker trio of one replica group in controller mode, restarts and the Java driver
# (interop.ControllerInterop). Sourced after scripts/lib.sh; sets no shell options and starts nothing by itself.
#
# Environment understood here:
#   CONTROLLER_IMPL=rust|java   whose controller (default rust)
#   CONTROLLER_MODE=standalone|embedded
#                               standalone (default): three controller processes plus one NameServer;
#                               embedded: three NameServers with enableControllerInNamesrv=true (the controller
#                               keys in the same file), which are then also the controller nodes
#   MQCONTROLLER=PATH           our controller binary (default target/debug/mqcontroller)
#   MQNAMESRV=PATH              our NameServer binary (default target/debug/mqnamesrv; built if missing)
#   NAMESRV_IMPL=rust|java      the NameServer next to standalone controllers (default rust = ours)

CTL_V5=5.5.0
CTL_CLUSTER=CtlCluster
CTL_BROKER=broker-a
CTL_TOPIC=CtlTopic
CTL_GROUP=InteropCtl
CTL_BROKERS=(b1 b2 b3)   # the replica group every scenario expects to be running
JAVA_DIR=$ROOT/interop/java
LIB=$JAVA_DIR/lib
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java

declare -A PID ADDR LOGF STARTS NSPORT
CTL_NODES=()     # controller node peer names (c0 c1 c2, or ns0 ns1 ns2 when embedded)
NS_NODES=()      # NameServer peer names
CTL_ADDRS=""     # controllerAddr for brokers: 127.0.0.1:P0;127.0.0.1:P1;127.0.0.1:P2
NS_ADDRS=""

ctl_log() { printf '[%s %s] %s\n' "${CTL_TAG:-ctl}" "$(date +%H:%M:%S)" "$*"; }

# ---------------------------------------------------------------------------------------------------
# Artifacts and binaries

ctl_fetch_lib() { # DIR PROFILE PROPERTY=VERSION
  maven_cached "$LIB/$1" && return 0
  ctl_log "fetching $1 from Maven Central"
  maven_fetch "$LIB/$1" "$JAVA_DIR" "$LOGS/maven-$1.log" -P"$2" -D"$3" -DincludeScope=runtime
}

# The 5.5.0 broker depends on rocketmq-controller (and so DLedger and JRaft): the servers lib dir holds
# ControllerStartup as well as BrokerStartup and NamesrvStartup.
ctl_prepare_artifacts() {
  ctl_fetch_lib "clients-$CTL_V5" clients "client.version=$CTL_V5" &&
    ctl_fetch_lib "servers-$CTL_V5" servers "server.version=$CTL_V5" || return 1
  [[ -f $LIB/servers-$CTL_V5/rocketmq-controller-$CTL_V5.jar ]] \
    || { echo "rocketmq-controller-$CTL_V5.jar is missing from $LIB/servers-$CTL_V5"; return 1; }
  # The same compile step and stamp as scripts/interop: every class of the harness, against the 5.x client jars.
  local stamp=$JAVA_DIR/target/classes/.built
  if [[ ! -f $stamp || -n $(find "$JAVA_DIR/src" "$JAVA_DIR/pom.xml" -newer "$stamp" 2>/dev/null) ]]; then
    ctl_log "compiling the Java harness"
    rm -rf "$JAVA_DIR/target/classes" && mkdir -p "$JAVA_DIR/target/classes"
    "${JAVA%java}javac" -encoding UTF-8 --release 17 -d "$JAVA_DIR/target/classes" -cp "$LIB/clients-$CTL_V5/*" \
      "$JAVA_DIR"/src/main/java/interop/*.java >"$LOGS/javac.log" 2>&1 || { cat "$LOGS/javac.log"; return 1; }
    touch "$stamp"
  fi
}

# Sets NS_BIN (our NameServer, when one is needed) and CTL_BIN (our standalone controller, when needed).
ctl_binaries() { # IMPL MODE NAMESRV_KIND
  local impl=$1 mode=$2 nskind=$3
  NS_BIN="" CTL_BIN=""
  if [[ ($impl == rust && $mode == embedded) || ($mode == standalone && $nskind == rust) ]]; then
    NS_BIN=${MQNAMESRV:-$ROOT/target/debug/mqnamesrv}
    if [[ ! -x $NS_BIN && -z ${MQNAMESRV:-} ]]; then
      ctl_log "building mqnamesrv (cargo build -p namesrv --bin mqnamesrv)"
      (cd "$ROOT" && cargo build -p namesrv --bin mqnamesrv) >"$LOGS/cargo.log" 2>&1 \
        || { tail -40 "$LOGS/cargo.log"; return 1; }
    fi
    [[ -x $NS_BIN ]] || { echo "no mqnamesrv binary at $NS_BIN"; return 1; }
  fi
  if [[ $impl == rust && $mode == standalone ]]; then
    CTL_BIN=${MQCONTROLLER:-$ROOT/target/debug/mqcontroller}
    [[ -x $CTL_BIN ]] || { echo "no mqcontroller binary at $CTL_BIN (set MQCONTROLLER, or build it: cargo build -p controller --bin mqcontroller)"; return 1; }
  fi
  # Run copies: a rebuild of target/debug during the run must not swap the binary under a restart.
  mkdir -p "$WORK/bin"
  if [[ -n $NS_BIN ]]; then cp "$NS_BIN" "$WORK/bin/mqnamesrv" && NS_BIN=$WORK/bin/mqnamesrv || return 1; fi
  if [[ -n $CTL_BIN ]]; then cp "$CTL_BIN" "$WORK/bin/mqcontroller" && CTL_BIN=$WORK/bin/mqcontroller || return 1; fi
  return 0
}

# ---------------------------------------------------------------------------------------------------
# Processes. Each peer is one background process; its output goes to $LOGS/NAME.log, after a restart to
# $LOGS/NAME.rN.log (LOGF[NAME] is the current one).

# ctl_alive PID: running and not a zombie.
ctl_alive() {
  [[ -n ${1:-} && $1 != 0 && -r /proc/$1/stat ]] || return 1
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z && ${stat:0:1} != X ]]
}

peer_alive() { ctl_alive "${PID[$1]:-}"; }

ctl_start_peer() { # NAME CMD...
  local name=$1 n
  shift
  n=${STARTS[$name]:-0}
  STARTS[$name]=$((n + 1))
  if ((n == 0)); then LOGF[$name]=$LOGS/$name.log; else LOGF[$name]=$LOGS/$name.r$n.log; fi
  "$@" >"${LOGF[$name]}" 2>&1 &
  PID[$name]=$!
  disown  # peers are killed on purpose; bash must not report that as a job failure
}

ctl_wait_line() { # NAME REGEX TIMEOUT_S
  local name=$1 re=$2 deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    grep -qE "$re" "${LOGF[$name]}" 2>/dev/null && return 0
    peer_alive "$name" || { echo "$name exited before printing '$re' (log: ${LOGF[$name]})"; tail -n 15 "${LOGF[$name]}" 2>/dev/null; return 1; }
    sleep 0.2
  done
  echo "$name did not print '$re' within $3 s (log: ${LOGF[$name]})"
  return 1
}

ctl_stop_peer() { # NAME...: SIGTERM (and SIGCONT, for a stopped one), SIGKILL after 10 s
  local p pid
  for p in "$@"; do
    pid=${PID[$p]:-}
    ctl_alive "$pid" || continue
    kill -TERM "$pid" 2>/dev/null; kill -CONT "$pid" 2>/dev/null
  done
  for _ in $(seq 100); do
    local alive=0
    for p in "$@"; do peer_alive "$p" && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  for p in "$@"; do peer_alive "$p" && kill -KILL "${PID[$p]}" 2>/dev/null; done
  return 0
}

ctl_stop_all() {
  local names=("${!PID[@]}")
  ((${#names[@]})) && ctl_stop_peer "${names[@]}"
  return 0
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Blocks of four consecutive free ports below the ephemeral range (a broker uses listenPort, listenPort-2
# for its "fast" server, and its HA port), so that no outgoing connection takes them between restarts.
EPHEMERAL_LO=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
((EPHEMERAL_LO > 12000)) || EPHEMERAL_LO=32768
NEXT_PORT=$((10000 + RANDOM % (EPHEMERAL_LO - 11000)))
port_block() { # sets BASE
  while :; do
    BASE=$NEXT_PORT; NEXT_PORT=$((NEXT_PORT + 4))
    ((NEXT_PORT < EPHEMERAL_LO - 8)) || NEXT_PORT=10000
    port_free "$BASE" && port_free $((BASE + 1)) && port_free $((BASE + 2)) && port_free $((BASE + 3)) && break
  done
}

# ---------------------------------------------------------------------------------------------------
# Configuration. ctl_configure IMPL MODE NAMESRV_KIND writes every config file under $WORK; the start
# functions read them, so a restart uses the same ports, store and identity.

ctl_configure() {
  CTL_IMPL=$1 CTL_MODE=$2 CTL_NSKIND=$3
  RMQ_HOME=$WORK/rocketmq-home
  mkdir -p "$RMQ_HOME/conf" "$WORK/tmp"
  JAVA_OPENS=("${JVM_OPENS[@]}" -Djava.io.tmpdir="$WORK/tmp")
  CLIENT_JVM=("${JAVA_OPENS[@]}" -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -Duser.home="$WORK/client-home")
  CTL_NODES=() NS_NODES=()
  local i peers="" ctl_ports=() ns_ports=()
  for i in 0 1 2; do
    port_block; ctl_ports+=("$BASE")
    peers+="n$i-127.0.0.1:$BASE;"
  done
  peers=${peers%;}
  CTL_ADDRS="127.0.0.1:${ctl_ports[0]};127.0.0.1:${ctl_ports[1]};127.0.0.1:${ctl_ports[2]}"
  if [[ $CTL_MODE == embedded ]]; then
    for i in 0 1 2; do port_block; ns_ports+=("$BASE"); NS_NODES+=("ns$i"); CTL_NODES+=("ns$i"); done
    NS_ADDRS="127.0.0.1:${ns_ports[0]};127.0.0.1:${ns_ports[1]};127.0.0.1:${ns_ports[2]}"
  else
    port_block; ns_ports+=("$BASE"); NS_NODES+=(namesrv)
    for i in 0 1 2; do CTL_NODES+=("c$i"); done
    NS_ADDRS="127.0.0.1:${ns_ports[0]}"
  fi
  # Controller nodes: the Java ControllerConfig keys; ours reads the same file (and ignores what it lacks).
  for i in 0 1 2; do
    local node=${CTL_NODES[$i]} dir=$WORK/${CTL_NODES[$i]}
    mkdir -p "$dir/home"
    ADDR[$node]=127.0.0.1:${ctl_ports[$i]}
    {
      echo "# controller node n$i of $CTL_GROUP"
      echo "controllerDLegerGroup=$CTL_GROUP"
      echo "controllerDLegerPeers=$peers"
      echo "controllerDLegerSelfId=n$i"
      echo "controllerStorePath=$dir/store"
      echo "mappedFileSize=67108864"
      echo "configStorePath=$dir/controller.properties"
      echo "rocketmqHome=$RMQ_HOME"
    } >"$dir/controller.conf"
  done
  for i in "${!NS_NODES[@]}"; do
    local node=${NS_NODES[$i]} dir=$WORK/${NS_NODES[$i]}
    mkdir -p "$dir/home"
    NSPORT[$node]=${ns_ports[$i]}
    {
      echo "bindAddress=127.0.0.1"
      echo "listenPort=${ns_ports[$i]}"
      echo "kvConfigPath=$dir/kvConfig.json"
      echo "rocketmqHome=$RMQ_HOME"
      # Ours: no HTTP port (its default 9877 would collide with other servers on the machine); keys
      # it does not know are ignored by Java's NameServer.
      echo "httpEnable=false"
      echo "routeSnapshotPath=$dir/routeSnapshot.json"
      echo "logDir=$dir/logs"
      if [[ $CTL_MODE == embedded ]]; then
        echo "enableControllerInNamesrv=true"
        grep -v '^#' "$dir/controller.conf" | grep -v '^configStorePath='
      fi
    } >"$dir/namesrv.conf"
  done
  local b
  for b in "${CTL_BROKERS[@]}"; do ctl_configure_broker "$b"; done
}

ctl_configure_broker() { # NAME [KEY=VALUE...] (later keys override earlier ones: Properties keep the last)
  local name=$1 dir=$WORK/$1
  shift
  port_block
  mkdir -p "$dir/home" "$dir/store"
  ADDR[$name]=127.0.0.1:$((BASE + 2))
  cat >"$dir/broker.conf" <<EOF
brokerClusterName=$CTL_CLUSTER
brokerName=$CTL_BROKER
brokerId=-1
brokerRole=SLAVE
enableControllerMode=true
controllerAddr=$CTL_ADDRS
allAckInSyncStateSet=true
namesrvAddr=$NS_ADDRS
flushDiskType=ASYNC_FLUSH
brokerIP1=127.0.0.1
brokerIP2=127.0.0.1
bindAddress=127.0.0.1
listenPort=$((BASE + 2))
haListenPort=$((BASE + 3))
storePathRootDir=$dir/store
storePathCommitLog=$dir/store/commitlog
mappedFileSizeCommitLog=67108864
mappedFileSizeConsumeQueue=600000
autoCreateTopicEnable=false
registerNameServerPeriod=10000
diskMaxUsedSpaceRatio=95
waitTimeMillsInSendQueue=3000
EOF
  printf '%s\n' "$@" >>"$dir/broker.conf"
}

# ---------------------------------------------------------------------------------------------------
# Starting peers (the config files must exist). Each start function starts and returns at once; the
# matching wait function waits for the boot line.

ctl_start_node() { # NAME: a controller node (standalone) or a NameServer (with or without controller)
  local name=$1 dir=$WORK/$1
  if [[ $name == c? ]]; then
    if [[ $CTL_IMPL == java ]]; then
      ctl_start_peer "$name" env ROCKETMQ_HOME="$RMQ_HOME" "$JAVA" "${JAVA_OPENS[@]}" -Xms64m -Xmx256m \
        -XX:+UseSerialGC -Duser.home="$dir/home" -cp "$LIB/servers-$CTL_V5/*" \
        org.apache.rocketmq.controller.ControllerStartup -c "$dir/controller.conf"
    else
      ctl_start_peer "$name" env HOME="$dir/home" ROCKETMQ_HOME="$RMQ_HOME" "$CTL_BIN" -c "$dir/controller.conf"
    fi
  else
    local java_ns=0
    if [[ $CTL_MODE == embedded ]]; then [[ $CTL_IMPL == java ]] && java_ns=1; else [[ $CTL_NSKIND == java ]] && java_ns=1; fi
    if ((java_ns)); then
      ctl_start_peer "$name" env ROCKETMQ_HOME="$RMQ_HOME" "$JAVA" "${JAVA_OPENS[@]}" -Xms64m -Xmx256m \
        -XX:+UseSerialGC -Duser.home="$dir/home" -cp "$LIB/servers-$CTL_V5/*" \
        org.apache.rocketmq.namesrv.NamesrvStartup -c "$dir/namesrv.conf"
    else
      ctl_start_peer "$name" env HOME="$dir/home" ROCKETMQ_HOME="$RMQ_HOME" "$NS_BIN" -c "$dir/namesrv.conf"
    fi
  fi
}

ctl_wait_node() { # NAME
  if [[ $1 == c? ]]; then
    # Both print this once listening; a leader is awaited through getControllerMetaData by the driver.
    ctl_wait_line "$1" 'Controller Server boot success' 90
  else
    ctl_wait_line "$1" 'The Name Server boot success' 90
  fi
}

ctl_start_broker() { # NAME
  local name=$1 dir=$WORK/$1
  ctl_start_peer "$name" env ROCKETMQ_HOME="$RMQ_HOME" "$JAVA" "${JAVA_OPENS[@]}" -Xms256m -Xmx512m \
    -XX:MaxDirectMemorySize=512m -XX:+UseSerialGC -Duser.home="$dir/home" -cp "$LIB/servers-$CTL_V5/*" \
    org.apache.rocketmq.broker.BrokerStartup -c "$dir/broker.conf"
}

ctl_wait_broker() { ctl_wait_line "$1" 'boot success' 180; }

# Every node of the topology (NameServers, controller nodes, the broker trio) at once, then waits.
ctl_start_all() {
  local n
  for n in $(printf '%s\n' "${NS_NODES[@]}" "${CTL_NODES[@]}" | sort -u); do ctl_start_node "$n"; done
  for n in "${CTL_BROKERS[@]}"; do ctl_start_broker "$n"; done
  for n in $(printf '%s\n' "${NS_NODES[@]}" "${CTL_NODES[@]}" | sort -u); do ctl_wait_node "$n" || return 1; done
  ctl_log "NameServer(s) $NS_ADDRS; controller nodes $CTL_ADDRS ($CTL_IMPL, $CTL_MODE)"
  for n in "${CTL_BROKERS[@]}"; do ctl_wait_broker "$n" || return 1; done
  ctl_log "brokers ${CTL_BROKERS[*]} booted: $(for n in "${CTL_BROKERS[@]}"; do printf '%s=%s ' "$n" "${ADDR[$n]}"; done)"
}

# ctl_heal [controllers]: restarts every node of the topology that is not running (with "controllers":
# only NameServers and controller nodes), and waits for their boot lines.
ctl_heal() {
  local what=${1:-all} n restarted=()
  for n in $(printf '%s\n' "${NS_NODES[@]}" "${CTL_NODES[@]}" | sort -u); do
    peer_alive "$n" || { ctl_start_node "$n"; restarted+=("$n"); }
  done
  if [[ $what == all ]]; then
    for n in "${CTL_BROKERS[@]}"; do
      peer_alive "$n" || { ctl_start_broker "$n"; restarted+=("$n"); }
    done
  fi
  ((${#restarted[@]})) || return 0
  ctl_log "restarting ${restarted[*]}"
  for n in "${restarted[@]}"; do
    if [[ " ${CTL_BROKERS[*]} " == *" $n "* ]]; then ctl_wait_broker "$n" || return 1; else ctl_wait_node "$n" || return 1; fi
  done
}

# ---------------------------------------------------------------------------------------------------
# The Java driver, given the current topology (pids change at every restart).

ctl_nodes_arg() { # NAME...: NAME@ADDR@PID;...
  local n out=""
  for n in "$@"; do out+="$n@${ADDR[$n]}@${PID[$n]:-0};"; done
  printf '%s' "${out%;}"
}

ctl_java() { # STEP KEY=VALUE...
  local step=$1
  shift
  timeout 600 "$JAVA" "${CLIENT_JVM[@]}" -cp "$JAVA_DIR/target/classes:$LIB/clients-$CTL_V5/*" \
    interop.ControllerInterop "$step" ns="$NS_ADDRS" cluster=$CTL_CLUSTER broker=$CTL_BROKER topic=$CTL_TOPIC \
    work="$WORK" controllers="$(ctl_nodes_arg "${CTL_NODES[@]}")" brokers="$(ctl_nodes_arg "${CTL_BROKERS[@]}")" "$@"
}

ctl_log_tails() { # PEER...
  local p f
  for p in "$@"; do
    for f in "${LOGF[$p]:-}" "$WORK/$p/home/logs/rocketmqlogs/broker.log"; do
      [[ -n $f && -s $f ]] || continue
      echo "----- tail of $f"
      tail -n 20 "$f"
    done
  done
}
