#!/bin/sh
# Build wire.bpf.c for this testbed and attach it to SN_IN (softnet runs this
# inside the SUT namespace, in this folder, with the SN_* variables set).
set -eu
obj="${TMPDIR:-/tmp}/$SN_NS-wire.bpf.o"   # one per testbed; teardown.sh removes it
macs() { echo "0x$1" | sed 's/:/,0x/g'; }
out_ifindex=$(cat "/sys/class/net/$SN_OUT/ifindex")   # ip netns exec: this namespace's /sys
clang -O2 -g -Wall -target bpf -I"/usr/include/$(uname -m)-linux-gnu" \
	-DOUT_IFINDEX="$out_ifindex" -DOUT_MAC="$(macs "$SN_OUT_MAC")" -DDST_MAC="$(macs "$SN_SINK_MAC")" \
	-c wire.bpf.c -o "$obj"
# Native XDP on the veth. Redirecting into SN_OUT works because its peer (the
# sink's veth) runs an XDP program of its own: veth takes XDP frames only then.
ip link set dev "$SN_IN" xdpdrv obj "$obj" sec xdp
