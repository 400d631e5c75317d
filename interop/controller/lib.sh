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
#   ROCKETMQ_VERSION=5.5.0|5.5.1   the Apache RocketMQ release of the brokers, the Java controller and the Java
#                               NameServer (default 5.5.0). Maven Central holds 5.5.1 only in part (broker,
#                               controller, store, common, remoting, tiered-store): the modules it lacks (client,
#                               tools, namesrv, srvutil, filter, auth, acl) come at CTL_UNPUBLISHED[version]
#   ROCKETMQ_CLIENT_VERSION=V   the client and admin jars of the driver (default: ROCKETMQ_VERSION, or the
#                               fallback of an in-part release: 5.5.0 for 5.5.1, as no 5.5.1 client or tools exist)
#
# Set by the script before ctl_configure (not from the environment): CTL_NETNS=1 puts every controller node in a
# network namespace of its own (see ctl_net_up).

CTL_V5=${ROCKETMQ_VERSION:-5.5.0}
# Releases whose modules Maven Central holds only in part: the version the missing modules are taken at.
declare -A CTL_UNPUBLISHED=([5.5.1]=5.5.0)
CTL_V5_FALLBACK=${CTL_UNPUBLISHED[$CTL_V5]:-}
CTL_CLIENT_V=${ROCKETMQ_CLIENT_VERSION:-${CTL_V5_FALLBACK:-$CTL_V5}}
# The servers lib dir: its name says when it mixes releases.
CTL_SERVERS=servers-$CTL_V5${CTL_V5_FALLBACK:+-with-$CTL_V5_FALLBACK}
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


# ---------------------------------------------------------------------------------------------------
# Artifacts and binaries

# The 5.x namesrv depends on rocketmq-controller (and so DLedger and JRaft), which the pom pins at the servers'
# version: the servers lib dir holds ControllerStartup as well as BrokerStartup and NamesrvStartup.
ctl_prepare_artifacts() {
  fetch_lib "clients-$CTL_CLIENT_V" clients "client.version=$CTL_CLIENT_V" &&
    fetch_lib "$CTL_SERVERS" servers "server.version=$CTL_V5" \
      "server.unpublished.version=${CTL_V5_FALLBACK:-$CTL_V5}" || return 1
  local jar
  for jar in broker controller; do
    [[ -f $LIB/$CTL_SERVERS/rocketmq-$jar-$CTL_V5.jar ]] \
      || { echo "rocketmq-$jar-$CTL_V5.jar is missing from $LIB/$CTL_SERVERS"; return 1; }
  done
  if [[ -n $CTL_V5_FALLBACK ]]; then
    local f older=""
    for f in "$LIB/$CTL_SERVERS"/rocketmq-*-"$CTL_V5_FALLBACK".jar; do
      [[ -e $f ]] && older+=" $(basename "$f" "-$CTL_V5_FALLBACK.jar")"
    done
    log "RocketMQ $CTL_V5: Maven Central lacks some of its modules, taken at $CTL_V5_FALLBACK:$older; driver clients $CTL_CLIENT_V"
  fi
  build_harness "$CTL_CLIENT_V"
}

# Sets NS_BIN (our NameServer, when one is needed) and CTL_BIN (our standalone controller, when needed).
ctl_binaries() { # IMPL MODE NAMESRV_KIND
  local impl=$1 mode=$2 nskind=$3
  NS_BIN="" CTL_BIN=""
  if [[ ($impl == rust && $mode == embedded) || ($mode == standalone && $nskind == rust) ]]; then
    NS_BIN=${MQNAMESRV:-$ROOT/target/debug/mqnamesrv}
    if [[ ! -x $NS_BIN && -z ${MQNAMESRV:-} ]]; then
      log "building mqnamesrv (cargo build -p namesrv --bin mqnamesrv)"
      (cd "$ROOT" && cargo build -p namesrv --bin mqnamesrv) >"$LOGS/cargo.log" 2>&1 \
        || { tail -40 "$LOGS/cargo.log"; return 1; }
    fi
    [[ -x $NS_BIN ]] || { echo "no mqnamesrv binary at $NS_BIN"; return 1; }
  fi
  if [[ $impl == rust && $mode == standalone ]]; then
    CTL_BIN=${MQCONTROLLER:-$ROOT/target/debug/mqcontroller}
    [[ -x $CTL_BIN ]] || { echo "no mqcontroller binary at $CTL_BIN (set MQCONTROLLER, or build it: cargo build -p rocketmq-controller --bin mqcontroller)"; return 1; }
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

# ---------------------------------------------------------------------------------------------------
# Network namespaces (CTL_NETNS=1; scenario l). Each controller node runs in a namespace of its own, joined by a
# bridge in the root namespace, on a private /24 that exists only in the namespaces made here (10.239.S.0/24: the
# bridge .1, controller node i .(11+i)). The broker(s), the standalone NameServer and the driver stay in the root
# namespace; brokers listen on the bridge address (the controllers' NOTIFY_BROKER_ROLE_CHANGED must reach them).
# $WORK/netctl cut|heal NODE adds (removes) blackhole routes between NODE's namespace and the other nodes' in both
# directions: NODE is cut off from the other controller nodes while everything else still reaches it. Needs root
# and iproute2; nothing else on the machine is touched, and ctl_net_down removes it all.
#
# In namespaces the standalone controller nodes are named, as a StatefulSet's headless service names its pods
# (CTL_NAMES=1): node i is ctl-i.ctl.interop in controllerDLegerPeers and in the brokers' controllerAddr. The names
# live in a hosts file per namespace (/etc/netns/NS/hosts, which `ip netns exec` shows as /etc/hosts) and in
# $WORK/hosts, which every JVM reads instead of the system's (jdk.net.hosts.file, cached 1 s). ctl_move_node moves
# a node to a new address under its name: killed, readdressed, its name pointed there in every hosts file (written
# in place: a namespace's bind mount keeps the file it was given), started again.

CTL_NETNS=${CTL_NETNS:-0}
CTL_NET_TAG=""
CTL_SUBNET=""
CTL_HOST=127.0.0.1   # the address brokers listen on and register
CTL_NAMES=0
CTL_TLS=${CONTROLLER_TLS:-0}   # 1: controller nodes take only TLS, every Java peer speaks it
declare -A NETNS CTL_IP CTL_MOVES

ctl_net_up() {
  command -v ip >/dev/null || { echo "the ip command (iproute2) is missing"; return 1; }
  [[ $(id -u) == 0 ]] || { echo "network namespaces need root"; return 1; }
  ip netns list >/dev/null 2>&1 || { echo "ip netns does not work here"; return 1; }
  local tag=ic$(($$ % 100000)) s="" c i
  # A third octet that no address or route of this machine uses.
  for c in $(seq $(($$ % 200 + 20)) 254) $(seq 20 $(($$ % 200 + 19))); do
    ip -o addr show | grep -q "inet 10\.239\.$c\." && continue
    ip route show table all | grep -q "10\.239\.$c\." && continue
    s=$c
    break
  done
  [[ -n $s ]] || { echo "no free 10.239.X.0/24"; return 1; }
  CTL_NET_TAG=$tag CTL_SUBNET=10.239.$s
  # An address of its own: a bridge otherwise takes its lowest port's, and a node moved to a
  # new port would leave every namespace's ARP entry for the host stale for seconds.
  ip link add "${tag}br" address "$(printf '02:00:0a:ef:%02x:01' "$s")" type bridge &&
    ip addr add "$CTL_SUBNET.1/24" dev "${tag}br" &&
    ip link set "${tag}br" up || return 1
  for i in 0 1 2; do
    ip netns add "${tag}n$i" &&
      ip link add "${tag}h$i" type veth peer name "${tag}i$i" &&
      ip link set "${tag}i$i" netns "${tag}n$i" &&
      ip link set "${tag}h$i" master "${tag}br" &&
      ip link set "${tag}h$i" up &&
      ip -n "${tag}n$i" addr add "$CTL_SUBNET.$((11 + i))/24" dev "${tag}i$i" &&
      ip -n "${tag}n$i" link set "${tag}i$i" up &&
      ip -n "${tag}n$i" link set lo up || return 1
  done
  CTL_HOST=$CTL_SUBNET.1
  for i in 0 1 2; do
    CTL_IP[$i]=$CTL_SUBNET.$((11 + i))
    mkdir -p "/etc/netns/${tag}n$i" || return 1
  done
  ctl_write_hosts || return 1
  cat >"$WORK/netctl" <<NETCTL
#!/usr/bin/env bash
# netctl cut|heal NODE: blackhole routes between NODE's namespace and the other controller nodes' (both ways),
# at the addresses they have now (\$WORK/addresses: index and address, one per line; nodes move).
set -u
declare -A IDX=([c0]=0 [c1]=1 [c2]=2 [ns0]=0 [ns1]=1 [ns2]=2)
[[ \$# == 2 && -n \${IDX[\$2]:-} ]] || { echo "usage: \$0 cut|heal NODE" >&2; exit 2; }
case \$1 in cut) verb=add ;; heal) verb=del ;; *) echo "cut or heal, not \$1" >&2; exit 2 ;; esac
ip_of() { awk -v i="\$1" '\$1 == i { print \$2 }' "$WORK/addresses"; }
i=\${IDX[\$2]} rc=0
for j in 0 1 2; do
  ((j == i)) && continue
  ip -n ${tag}n\$i route \$verb blackhole "\$(ip_of \$j)/32" || rc=1
  ip -n ${tag}n\$j route \$verb blackhole "\$(ip_of \$i)/32" || rc=1
done
exit \$rc
NETCTL
  chmod +x "$WORK/netctl"
  log "network namespaces ${tag}n0-2 on $CTL_SUBNET.0/24: bridge ${tag}br $CTL_HOST (brokers), controller nodes .11-.13"
}

ctl_net_down() {
  [[ -n $CTL_NET_TAG ]] || return 0
  local i
  for i in 0 1 2; do
    ip netns del "${CTL_NET_TAG}n$i" 2>/dev/null
    ip link del "${CTL_NET_TAG}h$i" 2>/dev/null
    rm -rf "/etc/netns/${CTL_NET_TAG}n$i"
  done
  ip link del "${CTL_NET_TAG}br" 2>/dev/null
  CTL_NET_TAG=""
  return 0
}

# The name of controller node I (in namespaces).
ctl_host_name() { echo "ctl-$1.ctl.interop"; }

# Every hosts file (each namespace's and the JVMs') from CTL_IP, written in place; $WORK/addresses for netctl.
ctl_write_hosts() {
  local i text
  text="127.0.0.1 localhost $(hostname)"$'\n'
  for i in 0 1 2; do text+="${CTL_IP[$i]} $(ctl_host_name "$i")"$'\n'; done
  for i in 0 1 2; do printf '%s' "$text" >"/etc/netns/${CTL_NET_TAG}n$i/hosts" || return 1; done
  printf '%s' "$text" >"$WORK/hosts"
  for i in 0 1 2; do echo "$i ${CTL_IP[$i]}"; done >"$WORK/addresses"
}

# ctl_move_node NAME: a rescheduled pod. kill -9 controller node NAME, give its namespace a new address, point its
# name there in every hosts file, start it again (same store, same name). Prints "MOVED NAME OLD NEW".
ctl_move_node() {
  local name=$1 i=${1#c} ns=${NETNS[$1]:-} old new
  [[ $CTL_NAMES == 1 && -n $ns ]] || { echo "$name is not a named node in a namespace"; return 1; }
  peer_alive "$name" && kill -KILL "${PID[$name]}"
  for _ in $(seq 100); do peer_alive "$name" || break; sleep 0.1; done
  peer_alive "$name" && { echo "$name outlived kill -9"; return 1; }
  CTL_MOVES[$name]=$((${CTL_MOVES[$name]:-0} + 1))
  old=${CTL_IP[$i]} new=$CTL_SUBNET.$((11 + i + 20 * CTL_MOVES[$name]))
  ip -n "$ns" addr del "$old/24" dev "${CTL_NET_TAG}i$i" &&
    ip -n "$ns" addr add "$new/24" dev "${CTL_NET_TAG}i$i" || return 1
  CTL_IP[$i]=$new
  ctl_write_hosts || return 1
  ctl_start_node "$name"
  echo "MOVED $name $old $new"
}

# ---------------------------------------------------------------------------------------------------
# Configuration. ctl_configure IMPL MODE NAMESRV_KIND writes every config file under $WORK; the start
# functions read them, so a restart uses the same ports, store and identity.

ctl_configure() {
  CTL_IMPL=$1 CTL_MODE=$2 CTL_NSKIND=$3
  RMQ_HOME=$WORK/rocketmq-home
  mkdir -p "$RMQ_HOME/conf" "$WORK/tmp"
  # Named nodes: names resolve by the hosts file of the moves, again after a second (the JDK keeps them 30 s).
  [[ $CTL_NETNS == 1 && $CTL_MODE == standalone ]] && CTL_NAMES=1
  JAVA_OPENS=("${JVM_OPENS[@]}" -Djava.io.tmpdir="$WORK/tmp")
  ((CTL_NAMES)) && JAVA_OPENS+=(-Djdk.net.hosts.file="$WORK/hosts" -Dsun.net.inetaddr.ttl=1 -Dsun.net.inetaddr.negative.ttl=0)
  # Every Java peer's remoting clients speak TLS (Java's test mode trusts any certificate); servers stay
  # permissive unless they are controller nodes (CTL_SERVER_TLS).
  ((CTL_TLS)) && JAVA_OPENS+=(-Dtls.enable=true)
  CTL_SERVER_TLS=()
  ((CTL_TLS)) && CTL_SERVER_TLS=(-Dtls.server.mode=enforcing)
  CLIENT_JVM=("${JAVA_OPENS[@]}" -Xms64m -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -Duser.home="$WORK/client-home")
  CTL_NODES=() NS_NODES=()
  local i peers="" ctl_ports=() ns_ports=() hosts=()
  for i in 0 1 2; do
    if [[ $CTL_NAMES == 1 ]]; then
      hosts+=("$(ctl_host_name "$i")")
    elif [[ $CTL_NETNS == 1 ]]; then
      hosts+=("$CTL_SUBNET.$((11 + i))")
    else
      hosts+=(127.0.0.1)
    fi
    port_block; ctl_ports+=("$BASE")
    peers+="n$i-${hosts[$i]}:$BASE;"
  done
  peers=${peers%;}
  CTL_ADDRS="${hosts[0]}:${ctl_ports[0]};${hosts[1]}:${ctl_ports[1]};${hosts[2]}:${ctl_ports[2]}"
  if [[ $CTL_MODE == embedded ]]; then
    for i in 0 1 2; do port_block; ns_ports+=("$BASE"); NS_NODES+=("ns$i"); CTL_NODES+=("ns$i"); done
    NS_ADDRS="${hosts[0]}:${ns_ports[0]};${hosts[1]}:${ns_ports[1]};${hosts[2]}:${ns_ports[2]}"
  else
    port_block; ns_ports+=("$BASE"); NS_NODES+=(namesrv)
    for i in 0 1 2; do CTL_NODES+=("c$i"); done
    NS_ADDRS="127.0.0.1:${ns_ports[0]}"
  fi
  # Controller nodes: the Java ControllerConfig keys; ours reads the same file (and ignores what it lacks).
  for i in 0 1 2; do
    local node=${CTL_NODES[$i]} dir=$WORK/${CTL_NODES[$i]}
    mkdir -p "$dir/home"
    ADDR[$node]=${hosts[$i]}:${ctl_ports[$i]}
    [[ $CTL_NETNS == 1 ]] && NETNS[$node]=${CTL_NET_TAG}n$i
    {
      echo "# controller node n$i of $CTL_GROUP"
      echo "controllerDLegerGroup=$CTL_GROUP"
      echo "controllerDLegerPeers=$peers"
      echo "controllerDLegerSelfId=n$i"
      echo "controllerStorePath=$dir/store"
      echo "mappedFileSize=67108864"
      echo "configStorePath=$dir/controller.properties"
      echo "rocketmqHome=$RMQ_HOME"
      # Ours reads it from its file (a NameServer that embeds the node too); Java's from a system property.
      ((CTL_TLS)) && echo "tls.server.mode=enforcing"
    } >"$dir/controller.conf"
  done
  for i in "${!NS_NODES[@]}"; do
    local node=${NS_NODES[$i]} dir=$WORK/${NS_NODES[$i]}
    mkdir -p "$dir/home"
    NSPORT[$node]=${ns_ports[$i]}
    local bind=127.0.0.1
    [[ $CTL_MODE == embedded ]] && bind=${hosts[$i]}
    {
      echo "bindAddress=$bind"
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
  ADDR[$name]=$CTL_HOST:$((BASE + 2))
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
brokerIP1=$CTL_HOST
brokerIP2=$CTL_HOST
bindAddress=$CTL_HOST
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
  local name=$1 dir=$WORK/$1 in=()
  # In its namespace, if it has one (ip netns exec execs the command: the pid stays the node's own).
  [[ -n ${NETNS[$name]:-} ]] && in=(ip netns exec "${NETNS[$name]}")
  if [[ $name == c? ]]; then
    if [[ $CTL_IMPL == java ]]; then
      ctl_start_peer "$name" "${in[@]}" env ROCKETMQ_HOME="$RMQ_HOME" "$JAVA" "${JAVA_OPENS[@]}" "${CTL_SERVER_TLS[@]}" \
        -Xms64m -Xmx256m -XX:+UseSerialGC -Duser.home="$dir/home" -cp "$LIB/$CTL_SERVERS/*" \
        org.apache.rocketmq.controller.ControllerStartup -c "$dir/controller.conf"
    else
      ctl_start_peer "$name" "${in[@]}" env HOME="$dir/home" ROCKETMQ_HOME="$RMQ_HOME" "$CTL_BIN" -c "$dir/controller.conf"
    fi
  else
    local java_ns=0
    if [[ $CTL_MODE == embedded ]]; then [[ $CTL_IMPL == java ]] && java_ns=1; else [[ $CTL_NSKIND == java ]] && java_ns=1; fi
    local server_tls=()
    [[ $CTL_MODE == embedded ]] && server_tls=("${CTL_SERVER_TLS[@]}")
    if ((java_ns)); then
      ctl_start_peer "$name" "${in[@]}" env ROCKETMQ_HOME="$RMQ_HOME" "$JAVA" "${JAVA_OPENS[@]}" "${server_tls[@]}" -Xms64m -Xmx256m \
        -XX:+UseSerialGC -Duser.home="$dir/home" -cp "$LIB/$CTL_SERVERS/*" \
        org.apache.rocketmq.namesrv.NamesrvStartup -c "$dir/namesrv.conf"
    else
      ctl_start_peer "$name" "${in[@]}" env HOME="$dir/home" ROCKETMQ_HOME="$RMQ_HOME" "$NS_BIN" -c "$dir/namesrv.conf"
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
    -XX:MaxDirectMemorySize=512m -XX:+UseSerialGC -Duser.home="$dir/home" -cp "$LIB/$CTL_SERVERS/*" \
    org.apache.rocketmq.broker.BrokerStartup -c "$dir/broker.conf"
}

ctl_wait_broker() { ctl_wait_line "$1" 'boot success' 180; }

# Every node of the topology (NameServers, controller nodes, the broker trio) at once, then waits.
ctl_start_all() {
  local n
  for n in $(printf '%s\n' "${NS_NODES[@]}" "${CTL_NODES[@]}" | sort -u); do ctl_start_node "$n"; done
  for n in "${CTL_BROKERS[@]}"; do ctl_start_broker "$n"; done
  for n in $(printf '%s\n' "${NS_NODES[@]}" "${CTL_NODES[@]}" | sort -u); do ctl_wait_node "$n" || return 1; done
  log "NameServer(s) $NS_ADDRS; controller nodes $CTL_ADDRS ($CTL_IMPL, $CTL_MODE)"
  for n in "${CTL_BROKERS[@]}"; do ctl_wait_broker "$n" || return 1; done
  log "brokers ${CTL_BROKERS[*]} booted: $(for n in "${CTL_BROKERS[@]}"; do printf '%s=%s ' "$n" "${ADDR[$n]}"; done)"
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
  log "restarting ${restarted[*]}"
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
  timeout 600 "$JAVA" "${CLIENT_JVM[@]}" -cp "$JAVA_DIR/target/classes:$LIB/clients-$CTL_CLIENT_V/*" \
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
