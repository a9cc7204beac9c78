#!/bin/sh
# Undo setup.sh: detach the program, remove the object. Safe to run after a
# setup that stopped halfway (softnet runs it however the testbed ends).
ip link set dev "$SN_IN" xdp off 2>/dev/null
rm -f "${TMPDIR:-/tmp}/$SN_NS-wire.bpf.o"
exit 0
