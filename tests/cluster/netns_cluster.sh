#!/usr/bin/env bash
# A test cluster inside one machine: N "hosts", each a network namespace with
# its own address and UTS hostname on one Linux bridge, an rsh agent that
# starts processes inside them (for mpirun's plm_rsh_agent: no sshd) and a
# hostfile. Runs COMMAND with the cluster up and tears everything down on
# exit, after a failure or a signal alike.
#
#   tests/cluster/netns_cluster.sh [-n N] [--rate MBIT] [--slots S] -- COMMAND...
#
# COMMAND sees CLUSTER_HOSTFILE, CLUSTER_AGENT, CLUSTER_SUBNET (CIDR, for
# btl_tcp_if_include / oob_tcp_if_include), CLUSTER_HOSTS (space separated)
# and CLUSTER_NS (the namespaces, in host order); inside the hosts, host1..hostN
# resolve to their addresses (/etc/netns/NS/hosts). --rate shapes every host's
# link to MBIT Mbit/s (tc tbf); --slots gives each host S slots (default 1). The subnet 10.213.<id>.0/24 exists only on
# this cluster's bridge. Exit 77 (a skip to ctest) when the machine cannot:
# not root, or no network namespaces or bridges; else COMMAND's exit code.
set -uo pipefail
n=2 rate="" slots=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) n="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
    --slots) slots="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "[cluster] unknown option $1 (usage: netns_cluster.sh [-n N] [--rate MBIT] [--slots S] -- COMMAND...)" >&2; exit 2 ;;
  esac
done
if [[ $# -eq 0 || ! "$n" =~ ^[1-4]$ || ! "$slots" =~ ^[1-8]$ ]]; then
  echo "[cluster] usage: netns_cluster.sh [-n N (1-4)] [--rate MBIT] [--slots S (1-8)] -- COMMAND..." >&2
  exit 2
fi
skip() { echo "[cluster] skipped: $1" >&2; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "no ip(8)"
# What a harness killed with SIGKILL left (its traps never ran): namespaces
# and bridges named after a process that is gone.
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^cr[0-9]+h[0-9]$'); do
  pid="${ns#cr}"; pid="${pid%h*}"
  kill -0 "$pid" 2>/dev/null || ip netns del "$ns" 2>/dev/null
done
for etc in /etc/netns/cr[0-9]*h[0-9]; do
  [[ -d "$etc" ]] || continue
  pid="${etc#/etc/netns/cr}"; pid="${pid%h*}"
  kill -0 "$pid" 2>/dev/null || rm -rf "$etc"
done
for link in $(ip -o link show type bridge 2>/dev/null | awk -F': ' '{print $2}' | grep -E '^cr[0-9]+br$'); do
  pid="${link#cr}"; pid="${pid%br}"
  kill -0 "$pid" 2>/dev/null || ip link del "$link" 2>/dev/null
done
id=$(( $$ % 200 + 20 ))
tag="cr$$"
br="${tag}br"
subnet="10.213.${id}.0/24"
work=$(mktemp -d /tmp/crucible_cluster.XXXXXX)
ns_list=() hosts=() etc_list=()

teardown() {
  for ns in "${ns_list[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  ip link del "$br" 2>/dev/null
  rm -rf "$work" "${etc_list[@]}"
}
trap teardown EXIT
trap 'exit 130' INT TERM

ip link add "$br" type bridge 2>/dev/null || skip "cannot create a bridge"
ip addr add "10.213.${id}.254/24" dev "$br" && ip link set "$br" up
for k in $(seq 1 "$n"); do
  ns="${tag}h$k" host="10.213.${id}.$k"
  ip netns add "$ns" 2>/dev/null || skip "cannot create a network namespace"
  ns_list+=("$ns") hosts+=("$host")
  ip link add "${tag}v$k" type veth peer name "${tag}p$k" || exit 1
  ip link set "${tag}p$k" netns "$ns" || exit 1
  ip link set "${tag}v$k" master "$br" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip link set "${tag}p$k" name eth0
  ip netns exec "$ns" ip addr add "$host/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  if [[ -n "$rate" ]]; then
    # Both directions: the host's egress inside its namespace, its ingress on the bridge port.
    # The bucket must hold a timer tick's worth of bytes (rate / 250 Hz) or
    # tbf cannot reach fast rates: at least 256 KiB.
    burst=$(( rate * 1000 / 8 / 250 )); (( burst < 262144 )) && burst=262144
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "${rate}mbit" burst "$burst" latency 50ms || exit 1
    tc qdisc add dev "${tag}v$k" root tbf rate "${rate}mbit" burst "$burst" latency 50ms || exit 1
  fi
  echo "$host slots=$slots" >> "$work/hostfile"
done
# Name resolution, as a cluster's DNS gives it: inside each namespace
# (ip netns exec bind-mounts /etc/netns/NS/hosts over /etc/hosts) every host
# name resolves to its address.
for k in $(seq 1 "$n"); do
  etc="/etc/netns/${tag}h$k"
  mkdir -p "$etc" && etc_list+=("$etc")
  { echo "127.0.0.1 localhost"; for j in $(seq 1 "$n"); do echo "${hosts[j-1]} host$j"; done; } > "$etc/hosts"
done

# The agent: `AGENT HOST COMMAND...` runs COMMAND (one shell string, as ssh
# would) inside HOST's namespace with the host's own hostname.
cat > "$work/agent" <<AGENT
#!/usr/bin/env bash
host="\$1"; shift
k="\${host##*.}"
exec ip netns exec "${tag}h\$k" unshare --uts bash -c "hostname host\$k; \$*"
AGENT
chmod +x "$work/agent"

export CLUSTER_HOSTFILE="$work/hostfile" CLUSTER_AGENT="$work/agent" CLUSTER_SUBNET="$subnet"
export CLUSTER_HOSTS="${hosts[*]}" CLUSTER_NS="${ns_list[*]}"
export PMIX_MCA_gds=hash
"$@"
